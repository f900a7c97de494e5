"""On the real API server: a RayCluster the API server refuses (a ResourceQuota allowing none) is
reported on the job itself — a failed attempt with the API server's reason (QuotaExceeded, retried
with backoff: provisioning.py) and a Warning event — nothing crashes, and the job proceeds once
the cause is gone."""

from pathlib import Path
from typing import Any

import pytest

from support.rljobs import Jobs, fake_job, no_rayclusters_quota, wait_for

pytestmark = pytest.mark.cluster

QUOTA = "no-rayclusters"


def _quota_attempt(jobs: Jobs, name: str) -> dict[str, Any] | None:
    attempts = (jobs.get(name) or {}).get("status", {}).get("attempts") or []
    return next((a for a in attempts if a.get("reason") == "QuotaExceeded"), None)


def _warnings(kube_api: Any, namespace: str, name: str) -> list[Any]:
    from kubernetes import client

    events = client.CoreV1Api(kube_api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    )
    return [e for e in events.items if e.type == "Warning" and "exceeded quota" in e.message]


def test_a_refused_raycluster_fails_the_attempt_with_the_reason_and_clears(
    kube_api: Any, job_namespace: str, jobs: Jobs, tmp_path: Path
) -> None:
    from kubernetes import client

    no_rayclusters_quota(kube_api, job_namespace, QUOTA)
    # attempts to spare: each refused one fails and is retried with backoff until the quota goes
    jobs.apply(fake_job("quota", tmp_path, "fake-steps-2-1", backoffLimit=20))

    failed = wait_for("an attempt failed QuotaExceeded", lambda: _quota_attempt(jobs, "quota"))
    assert "exceeded quota: no-rayclusters" in failed["message"]
    assert jobs.rayclusters() == []
    wait_for(
        "a Warning event naming the quota", lambda: _warnings(kube_api, job_namespace, "quota")
    )

    client.CoreV1Api(kube_api).delete_namespaced_resource_quota(QUOTA, job_namespace)
    wait_for("the RayCluster of a later attempt", lambda: jobs.rayclusters(), timeout=240)
    assert (jobs.get("quota") or {}).get("status", {}).get("phase") != "Failed"
