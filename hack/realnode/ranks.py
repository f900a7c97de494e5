"""Where a job's training ranks run, seen from inside the pods (the real-pod tests, `make demo`).

Each rank is a Ray actor (`kuberl_runtime.launcher.ray.RankProcess`), titled `ray::RankProcess...`
in the process list of the pod it runs in. A pod has its own PID namespace, so `kubectl exec`
into a pod finds only the ranks running there, and each rank's /proc/<pid>/environ is what that
pod's raylet started it with: the container env the operator gave the pod, not the driver's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

RANK_ACTOR = "RankProcess"
# For each rank actor in the pod: `rank-pid=<pid>`, then its KUBERL_* env, one per line.
RANK_PROBE = (
    "for p in /proc/[0-9]*; do "
    f"if tr '\\0' ' ' <$p/cmdline 2>/dev/null | grep -q '^ray::{RANK_ACTOR}'; then "
    "echo rank-pid=${p#/proc/}; tr '\\0' '\\n' <$p/environ | grep -E '^KUBERL_'; fi; done"
)

Kubectl = Callable[..., str]


def rank_in_pod(kubectl: Kubectl, namespace: str, pod: str) -> dict[str, str] | None:
    """The env (and `rank-pid`) of a rank actor running inside `pod`; None while none runs."""
    output = kubectl("exec", "-n", namespace, pod, "--", "sh", "-c", RANK_PROBE, check=False)
    if "rank-pid=" not in output:
        return None
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


def find_rank(kubectl: Kubectl, namespace: str, cluster: str) -> dict[str, Any] | None:
    """The first Running pod of RayCluster `cluster` (workers first) a rank runs in:
    {"role": "worker" | "head", "pod": the Pod, "env": rank_in_pod's answer}; None before."""
    for role in ("worker", "head"):
        selector = f"ray.io/cluster={cluster},ray.io/node-type={role}"
        listing = kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json")
        for pod in json.loads(listing)["items"]:
            if pod["status"].get("phase") != "Running":
                continue
            if found := rank_in_pod(kubectl, namespace, pod["metadata"]["name"]):
                return {"role": role, "pod": pod, "env": found}
    return None
