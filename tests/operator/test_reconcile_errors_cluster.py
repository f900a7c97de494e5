"""On the real API server: a reconcile the API server refuses (a ResourceQuota allowing no
RayClusters) is reported on the job itself — Synced=False with the API server's reason and a
Warning event — nothing crashes, and the job proceeds once the cause is gone."""

from pathlib import Path
from typing import Any

import pytest

from support.rljobs import Jobs, fake_job, wait_for

pytestmark = pytest.mark.cluster

QUOTA = "no-rayclusters"


def _quota(kube_api: Any, namespace: str) -> None:
    from kubernetes import client

    body = {
        "metadata": {"name": QUOTA},
        "spec": {"hard": {"count/rayclusters.ray.io": "0"}},
    }
    client.CoreV1Api(kube_api).create_namespaced_resource_quota(namespace, body)


def _synced(jobs: Jobs, name: str) -> dict[str, Any]:
    conditions = (jobs.get(name) or {}).get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Synced"), {})


def _warnings(kube_api: Any, namespace: str, name: str) -> list[Any]:
    from kubernetes import client

    events = client.CoreV1Api(kube_api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    )
    return [e for e in events.items if e.type == "Warning" and e.reason == "ReconcileError"]


def test_a_refused_reconcile_shows_in_a_condition_and_clears(
    kube_api: Any, job_namespace: str, jobs: Jobs, tmp_path: Path
) -> None:
    from kubernetes import client

    _quota(kube_api, job_namespace)
    jobs.apply(fake_job("quota", tmp_path, "fake-steps-2-1"))

    failing = wait_for(
        "Synced=False",
        lambda: (c := _synced(jobs, "quota")) and c["status"] == "False" and c,
        timeout=120,
    )
    assert failing["reason"] == "ReconcileError"
    assert "exceeded quota" in failing["message"] and "retrying in" in failing["message"]
    assert jobs.rayclusters() == []
    wait_for("a ReconcileError Warning event", lambda: _warnings(kube_api, job_namespace, "quota"))

    client.CoreV1Api(kube_api).delete_namespaced_resource_quota(QUOTA, job_namespace)
    recovered = wait_for(
        "Synced=True",
        lambda: (c := _synced(jobs, "quota")) and c["status"] == "True" and c,
        timeout=180,
    )
    assert recovered["reason"] == "ReconcileSuccess"
    wait_for("the RayCluster", lambda: jobs.rayclusters(), timeout=60)
