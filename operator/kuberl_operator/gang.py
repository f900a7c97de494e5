"""Gang scheduling: the head is scheduled by the same scheduler as the workers.

A pool's ``schedulerName`` (volcano for Ascend chip topology, or any batch scheduler) used to
reach the workers only, so the head went through the default scheduler and sat outside the gang.
"""

from typing import Any

from kuberl_api.job import RLTrainingJobSpec
from kuberl_operator.builders.common import quantity_bytes


def worker_scheduler(spec: RLTrainingJobSpec) -> str | None:
    """The pools' scheduler when they name one (the first pool's, when several differ)."""
    return next((pool.scheduler_name for pool in spec.worker_pools if pool.scheduler_name), None)


def schedule_head_with_workers(body: dict[str, Any], spec: RLTrainingJobSpec) -> None:
    scheduler = worker_scheduler(spec)
    if scheduler:
        body["spec"]["headGroupSpec"]["template"]["spec"]["schedulerName"] = scheduler


# --- Volcano ---------------------------------------------------------------------------------

VOLCANO = "volcano"
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC_ANNOTATION = "volcano.sh/task-spec"
HEAD_TASK = "head"


def podgroup_name(raycluster: str) -> str:
    return f"{raycluster}-pg"


def build_podgroup(raycluster: dict[str, Any], owner: dict[str, Any]) -> dict[str, Any]:
    """The gang of one RayCluster: every Ray pod or none (Volcano's PodGroup, v1beta1).

    minMember counts the head and every worker; minTaskMember names each group (its pods carry
    ``volcano.sh/task-spec``); minResources sums the pods' requests so Volcano's queue admits
    the whole gang at once. Call after ``annotate_for_volcano`` on the same RayCluster.
    """
    meta, spec = raycluster["metadata"], raycluster["spec"]
    tasks = {HEAD_TASK: 1}
    pods = [spec["headGroupSpec"]["template"]["spec"]]
    for group in spec["workerGroupSpecs"]:
        tasks[group["groupName"]] = group["replicas"]
        pods += [group["template"]["spec"]] * group["replicas"]
    body: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": podgroup_name(meta["name"]),
            "namespace": meta["namespace"],
            "labels": dict(meta.get("labels") or {}),
            "ownerReferences": [owner],
        },
        "spec": {
            "minMember": sum(tasks.values()),
            "minTaskMember": tasks,
            "minResources": _summed_requests(pods),
        },
    }
    priority = pods[0].get("priorityClassName")
    if priority:
        body["spec"]["priorityClassName"] = priority
    return body


def annotate_for_volcano(raycluster: dict[str, Any]) -> None:
    """Point every Ray pod at the cluster's PodGroup, as KubeRay's own volcano plugin does."""
    spec, name = raycluster["spec"], podgroup_name(raycluster["metadata"]["name"])
    groups = [(HEAD_TASK, spec["headGroupSpec"])]
    groups += [(group["groupName"], group) for group in spec["workerGroupSpecs"]]
    for task, group in groups:
        metadata = group["template"].setdefault("metadata", {})
        annotations = metadata.setdefault("annotations", {})
        annotations[GROUP_NAME_ANNOTATION] = name
        annotations[TASK_SPEC_ANNOTATION] = task


def _summed_requests(pods: list[dict[str, Any]]) -> dict[str, str]:
    totals: dict[str, int] = {}
    for pod in pods:
        for container in pod.get("containers", []):
            for resource, value in (container.get("resources", {}).get("requests") or {}).items():
                totals[resource] = totals.get(resource, 0) + _amount(resource, value)
    return {
        resource: (f"{amount}m" if resource == "cpu" else str(amount))
        for resource, amount in sorted(totals.items())
    }


def _amount(resource: str, value: Any) -> int:
    """cpu in millicores, memory in bytes, anything else (GPUs, NPUs) as a count."""
    text = str(value)
    if resource == "cpu":
        return int(text[:-1]) if text.endswith("m") else round(float(text) * 1000)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return quantity_bytes(text)
    return int(text)


def gang_objects(
    raycluster: dict[str, Any], spec: RLTrainingJobSpec, owner: dict[str, Any]
) -> list[dict[str, Any]]:
    """Objects to create before the RayCluster: a PodGroup when Volcano schedules the pools
    (its pods are annotated here), nothing otherwise."""
    if worker_scheduler(spec) != VOLCANO:
        return []
    annotate_for_volcano(raycluster)
    return [build_podgroup(raycluster, owner)]
