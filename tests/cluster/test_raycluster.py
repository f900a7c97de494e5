"""KubeRay against the real scheduler and kwok's fake GPU pool: placement, readiness, refusal."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from testcluster.probes import wait_until

pytestmark = pytest.mark.cluster

RAY_IMAGE = "rayproject/ray:2.46.0"  # never pulled: kwok only pretends to run containers


def build_raycluster(name: str, gpus_per_worker: int, num_workers: int) -> dict[str, Any]:
    """A RayCluster with a CPU head and one GPU worker group that tolerates the GPU taint."""
    head = {
        "name": "ray-head",
        "image": RAY_IMAGE,
        "resources": {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "8Gi"}},
    }
    worker = {
        "name": "ray-worker",
        "image": RAY_IMAGE,
        "resources": {
            "requests": {"cpu": "16", "memory": "128Gi"},
            "limits": {"memory": "128Gi", "nvidia.com/gpu": str(gpus_per_worker)},
        },
    }
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [head]}}},
            "workerGroupSpecs": [
                {
                    "groupName": "gpu",
                    "replicas": num_workers,
                    "minReplicas": num_workers,
                    "maxReplicas": num_workers,
                    "rayStartParams": {},
                    "template": {
                        "spec": {
                            "containers": [worker],
                            # No nodeSelector: the GPU request alone must steer the scheduler.
                            "tolerations": [
                                {
                                    "key": "nvidia.com/gpu",
                                    "operator": "Exists",
                                    "effect": "NoSchedule",
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def create_raycluster(kube_api: Any, namespace: str, body: dict[str, Any]) -> None:
    client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        "ray.io", "v1", namespace, "rayclusters", body
    )


def raycluster_state(kube_api: Any, namespace: str, name: str) -> str | None:
    obj = client.CustomObjectsApi(kube_api).get_namespaced_custom_object(
        "ray.io", "v1", namespace, "rayclusters", name
    )
    return obj.get("status", {}).get("state")


def pods_of(kube_api: Any, namespace: str, name: str, node_type: str) -> list[Any]:
    selector = f"ray.io/cluster={name},ray.io/node-type={node_type}"
    return client.CoreV1Api(kube_api).list_namespaced_pod(namespace, label_selector=selector).items


def is_ready(pod: Any) -> bool:
    conditions = {c.type: c.status for c in pod.status.conditions or []}
    return pod.status.phase == "Running" and conditions.get("Ready") == "True"


def test_gpu_raycluster_is_placed_on_the_gpu_pool_and_becomes_ready(kube_api, namespace) -> None:
    create_raycluster(
        kube_api, namespace, build_raycluster("gpu-ok", gpus_per_worker=8, num_workers=2)
    )

    wait_until(
        "RayCluster gpu-ok state=ready",
        lambda: raycluster_state(kube_api, namespace, "gpu-ok") == "ready",
        None,
        timeout=120,
    )
    workers = pods_of(kube_api, namespace, "gpu-ok", "worker")
    heads = pods_of(kube_api, namespace, "gpu-ok", "head")
    assert len(workers) == 2 and len(heads) == 1
    assert all(is_ready(pod) for pod in workers + heads)
    # 8 GPUs each: the two workers fill both GPU nodes, one per node.
    assert sorted(pod.spec.node_name for pod in workers) == ["gpu-0", "gpu-1"]
    # The head tolerates no accelerator taint, so only the CPU pool can take it.
    assert heads[0].spec.node_name.startswith("cpu-")


def test_raycluster_asking_for_more_gpus_than_a_node_has_stays_unschedulable(
    kube_api, namespace
) -> None:
    create_raycluster(
        kube_api, namespace, build_raycluster("gpu-too-big", gpus_per_worker=16, num_workers=1)
    )

    def scheduler_reason() -> str | None:
        for pod in pods_of(kube_api, namespace, "gpu-too-big", "worker"):
            for condition in pod.status.conditions or []:
                if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
                    return condition.message
        return None

    wait_until(
        "the scheduler to refuse the worker", lambda: scheduler_reason() is not None, None, 60
    )
    assert "Insufficient nvidia.com/gpu" in scheduler_reason()
    (worker,) = pods_of(kube_api, namespace, "gpu-too-big", "worker")
    assert worker.spec.node_name is None and worker.status.phase == "Pending"
    assert raycluster_state(kube_api, namespace, "gpu-too-big") != "ready"
