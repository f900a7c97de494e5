"""The fake node pools from hack/nodepools.yaml exist, are Ready and look like real pools."""

from __future__ import annotations

import json

import pytest
from testcluster.nodepools import POOL_LABEL, load_nodepools

pytestmark = pytest.mark.cluster


def test_get_nodes_lists_every_pool(kubectl) -> None:
    listing = kubectl("get", "nodes")
    for pool in load_nodepools():
        for name in pool.node_names():
            assert name in listing, f"node {name} of pool {pool.name} missing:\n{listing}"


def test_nodes_are_ready_with_declared_capacity_labels_and_taints(kubectl) -> None:
    nodes = {
        item["metadata"]["name"]: item
        for item in json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
    }
    for pool in load_nodepools():
        for name in pool.node_names():
            node = nodes[name]
            assert node["metadata"]["labels"][POOL_LABEL] == pool.name
            assert pool.labels.items() <= node["metadata"]["labels"].items()
            for resource, quantity in pool.capacity.items():
                assert node["status"]["allocatable"][resource] == quantity, (name, resource)
            taints = [
                {k: t[k] for k in ("key", "value", "effect")}
                for t in node["spec"].get("taints", [])
            ]
            assert taints == pool.taints
            ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
            assert ready == "True", f"{name} is not Ready (kwok should keep it Ready)"


def test_accelerator_pools_advertise_their_device_resources(kubectl) -> None:
    allocatable = {
        item["metadata"]["labels"][POOL_LABEL]: item["status"]["allocatable"]
        for item in json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
    }
    assert allocatable["gpu"]["nvidia.com/gpu"] == "8"
    assert allocatable["npu"]["huawei.com/Ascend910"] == "8"
    assert "nvidia.com/gpu" not in allocatable["cpu"]


def test_kwok_renews_every_fake_nodes_lease(kube_api) -> None:
    """Node liveness is the node's Lease: unrenewed, the node lifecycle controller would mark the
    node NotReady once its grace period ran out and flip every pod on it to not-ready."""
    from kubernetes import client

    from support.rljobs import wait_for

    leases = client.CoordinationV1Api(kube_api)
    names = [name for pool in load_nodepools() for name in pool.node_names()]

    def renewals() -> dict:
        found = {lease.metadata.name: lease.spec.renew_time
                 for lease in leases.list_namespaced_lease("kube-node-lease").items}  # fmt: skip
        return {name: found.get(name) for name in names}

    first = wait_for("a Lease for every fake node", lambda: all((r := renewals()).values()) and r)
    wait_for(
        "every fake node's Lease renewed",
        lambda: all(renewals()[name] > first[name] for name in names),
        timeout=60,
    )
