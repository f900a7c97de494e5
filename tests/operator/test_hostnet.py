"""spec.network: hostNetwork — Ray pods on the node's network, each RayCluster on its own ports."""

from typing import Any

import pytest

from kuberl_api.validation import parse_document, validate_document
from kuberl_operator.builders import JobRef, build_raycluster
from kuberl_operator.builders.hostnet import (
    NODE_PORT_RANGE,
    PORT_RANGE,
    dashboard_address,
    ray_ports,
)
from support.manifests import valid_manifest, with_changes

JOB = JobRef("grpo", "team-a", "uid-123")
TWO_POOLS = {
    "spec.workerPools": [
        {"name": "cpu", "nodes": 1, "cpu": "4", "memory": "8Gi"},
        {"name": "more", "nodes": 1, "cpu": "2", "memory": "4Gi"},
    ],
    "spec.backend_config.actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
    "spec.storage": {"output": {"claimName": "af-shared"}},  # two nodes need shared outputs
}


def cluster(changes: dict[str, Any]) -> dict[str, Any]:
    result = validate_document(parse_document(with_changes(valid_manifest(), changes)))
    assert result.ok, [p.render() for p in result.errors]
    return build_raycluster(JOB, result.spec, 1, "default:img")


def groups(rc: dict[str, Any]) -> list[dict[str, Any]]:
    return [rc["spec"]["headGroupSpec"], *rc["spec"]["workerGroupSpecs"]]


def all_ports(ports: dict[str, int]) -> set[int]:
    return set(ports.values()) | set(range(ports["min-worker-port"], ports["max-worker-port"] + 1))


def test_pod_network_is_the_default():
    for group in groups(cluster(TWO_POOLS)):
        pod = group["template"]["spec"]
        assert "hostNetwork" not in pod and "node-ip-address" not in group["rayStartParams"]


def test_unknown_network_is_refused():
    result = validate_document(
        parse_document(with_changes(valid_manifest(), {"spec.network": "hostnetwork"}))
    )
    assert not result.ok
    assert any("network" in problem.render() for problem in result.errors)


def test_every_ray_port_of_every_pod_is_distinct_and_declared():
    rc = cluster({**TWO_POOLS, "spec.network": "hostNetwork"})
    seen: set[int] = set()
    for index, group in enumerate(groups(rc)):
        pod = group["template"]["spec"]
        assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
        params = group["rayStartParams"]
        assert params["node-ip-address"] == "$KUBERL_NODE_IP"
        numbers = {name: int(value) for name, value in params.items() if name.endswith("port")}
        assert len(numbers) == (11 if index == 0 else 8)
        used = all_ports(numbers)
        assert not used & seen, "two pod groups of one RayCluster share a port"
        seen |= used
        container = pod["containers"][0]
        declared = {port["containerPort"] for port in container["ports"]}
        env = {var["name"]: var for var in container["env"]}
        metrics_port = int(env["KUBERL_METRICS_PORT"]["value"])
        # Declared ports are hostPorts: the scheduler keeps pods that would share one apart.
        assert declared == used | {metrics_port}
        assert metrics_port not in used
        assert all(PORT_RANGE[0] <= port <= PORT_RANGE[1] for port in declared)
        assert env["KUBERL_NODE_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
        # Set on a worker, it makes Ray refuse to join the cluster ("not supported on OSX").
        assert ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" in env) == (index == 0)
        names = [port["name"] for port in container["ports"]]
        assert len(names) == len(set(names)) and all(len(name) <= 15 for name in names)
    head = groups(rc)[0]
    assert head["rayStartParams"]["dashboard-host"] == "$KUBERL_NODE_IP"
    assert {"gcs-server", "dashboard", "client", "runtime-metrics"} <= {
        port["name"] for port in head["template"]["spec"]["containers"][0]["ports"]
    }


def test_ray_clusters_get_different_blocks_and_the_same_one_every_time():
    bases = {min(all_ports(ray_ports("team-a", f"job-{i}-a1", 1)[0])) for i in range(100)}
    # ~330 blocks: a collision (birthday odds) only makes the scheduler keep the pods apart.
    assert len(bases) >= 80
    assert ray_ports("team-a", "job-a1", 2) == ray_ports("team-a", "job-a1", 2)
    assert ray_ports("team-a", "job-a1", 1) != ray_ports("team-b", "job-a1", 1)


@pytest.mark.parametrize("pools", [1, 16])
def test_blocks_stay_inside_the_range(pools):
    for i in range(200):
        for ports in ray_ports("ns", f"c{i}", pools):
            assert PORT_RANGE[0] <= min(all_ports(ports)) <= max(all_ports(ports)) <= PORT_RANGE[1]


def test_no_port_falls_in_the_node_port_range():
    """A Service's nodePort (30000-32767 by default) binds every node: a Ray port there could
    be taken before the head starts, or shadow a Service."""
    low, high = NODE_PORT_RANGE
    for i in range(1000):
        for ports in ray_ports("ns", f"c{i}", 16 if i % 2 else 1):
            assert not any(low <= port <= high for port in all_ports(ports)), ports


def test_dashboard_address_is_the_head_host_ip_and_allocated_port():
    head = ray_ports("team-a", "grpo-a1", 1)[0]
    assert dashboard_address("10.1.2.3", head) == f"http://10.1.2.3:{head['dashboard-port']}"
