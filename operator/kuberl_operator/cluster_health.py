"""Is a RayCluster ready, and if not, why: read from its status and its pods. Pure functions."""

from dataclasses import dataclass
from typing import Any

_IMAGE_REASONS = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
_CONFIG_REASONS = {"CreateContainerConfigError", "CreateContainerError"}


@dataclass(frozen=True)
class ClusterHealth:
    ready: bool
    reason: str
    message: str
    ready_workers: int | None = None
    desired_workers: int | None = None
    state: str | None = None


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}


def raycluster_ready(raycluster: dict[str, Any]) -> bool:
    status = raycluster.get("status") or {}
    conditions = _conditions(raycluster)
    head = conditions.get("HeadPodReady", {}).get("status") == "True"
    provisioned = conditions.get("RayClusterProvisioned", {}).get("status") == "True"
    return (head and provisioned) or (status.get("state") == "ready" and not conditions)


def pod_problem(pods: list[dict[str, Any]]) -> tuple[str, str] | None:
    """The first reason a pod cannot run: unschedulable, image pull, bad container config."""
    for pod in pods:
        name = pod.get("metadata", {}).get("name", "?")
        status = pod.get("status") or {}
        for condition in status.get("conditions") or []:
            if condition.get("type") == "PodScheduled" and condition.get("reason") == (
                "Unschedulable"
            ):
                return "Unschedulable", f"pod {name}: {condition.get('message', '')}".strip()
        for container in (status.get("containerStatuses") or []) + (
            status.get("initContainerStatuses") or []
        ):
            waiting = (container.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason")
            if reason in _IMAGE_REASONS:
                return "ImagePullBackOff", f"pod {name}: {reason}: {waiting.get('message', '')}"
            if reason in _CONFIG_REASONS:
                return reason, f"pod {name}: {waiting.get('message', '')}"
    return None


def cluster_health(raycluster: dict[str, Any], pods: list[dict[str, Any]]) -> ClusterHealth:
    status = raycluster.get("status") or {}
    counts = {
        "ready_workers": status.get("readyWorkerReplicas"),
        "desired_workers": status.get("desiredWorkerReplicas"),
        "state": status.get("state"),
    }
    if raycluster_ready(raycluster):
        return ClusterHealth(True, "RayClusterReady", "head and all workers are ready", **counts)
    if problem := pod_problem(pods):
        return ClusterHealth(False, problem[0], problem[1], **counts)
    failure = _conditions(raycluster).get("ReplicaFailure")
    if failure and failure.get("status") == "True":
        message = f"{failure.get('reason', '')}: {failure.get('message', '')}"
        return ClusterHealth(False, "ReplicaFailure", message, **counts)
    ready, desired = counts["ready_workers"], counts["desired_workers"]
    progress = f" ({ready or 0}/{desired} workers ready)" if desired is not None else ""
    return ClusterHealth(False, "PodsProvisioning", "waiting for Ray pods" + progress, **counts)
