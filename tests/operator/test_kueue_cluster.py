"""Kueue for real: the Kueue controller of the local control plane admits, holds and preempts the
RayClusters of queued RLTrainingJobs, and the operator follows (hack/testcluster/kueue.py).

A ClusterQueue whose quota fits exactly one job (head 2 CPU/8 GiB + one 2 CPU/4 GiB worker), a
LocalQueue in the job namespace, and two WorkloadPriorityClasses. The operator runs as a process
(admin credentials: the chart's RBAC is proven in tests/charts); the Ray side is a fake Jobs API
(support/fake_dashboard.py), so the test decides when a job ends, and plays the runtime by
writing progress and a checkpoint into status.
"""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from support.fake_dashboard import FakeDashboard
from support.rljobs import GROUP, PLURAL, VERSION, Jobs, fake_job, wait_for

pytestmark = pytest.mark.cluster

KUEUE = ("kueue.x-k8s.io", "v1beta2")


def _create(custom: Any, plural: str, body: dict, namespace: str | None = None) -> None:
    body = {"apiVersion": "/".join(KUEUE), **body}
    if namespace is None:
        custom.create_cluster_custom_object(*KUEUE, plural, body)
    else:
        custom.create_namespaced_custom_object(*KUEUE, namespace, plural, body)


@pytest.fixture
def queue(kube_api: Any, job_namespace: str) -> Iterator[dict[str, str]]:
    from kubernetes import client

    custom = client.CustomObjectsApi(kube_api)
    suffix = uuid.uuid4().hex[:6]
    names = {
        "flavor": f"flavor-{suffix}",
        "cq": f"cq-{suffix}",
        "lq": "team",
        "low": f"low-{suffix}",
        "high": f"high-{suffix}",
    }
    _create(custom, "resourceflavors", {"kind": "ResourceFlavor",
                                         "metadata": {"name": names["flavor"]}})  # fmt: skip
    quota = [{"name": "cpu", "nominalQuota": "5"}, {"name": "memory", "nominalQuota": "14Gi"}]
    cluster_queue = {
        "kind": "ClusterQueue",
        "metadata": {"name": names["cq"]},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": job_namespace}},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [{"name": names["flavor"], "resources": quota}],
                }
            ],
        },
    }
    _create(custom, "clusterqueues", cluster_queue)
    local = {"kind": "LocalQueue", "metadata": {"name": names["lq"]},
             "spec": {"clusterQueue": names["cq"]}}  # fmt: skip
    _create(custom, "localqueues", local, job_namespace)
    for name, value in ((names["low"], 10), (names["high"], 1000)):
        body = {"kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}
        _create(custom, "workloadpriorityclasses", body)
    yield names
    for plural, name in (
        ("clusterqueues", names["cq"]),
        ("resourceflavors", names["flavor"]),
        ("workloadpriorityclasses", names["low"]),
        ("workloadpriorityclasses", names["high"]),
    ):
        custom.delete_cluster_custom_object(*KUEUE, plural, name)


def queued_job(name: str, tmp_path: Any, priority: str) -> dict:
    body = fake_job(name, tmp_path / name, "fake-steps-1-1")
    body["spec"]["scheduling"] = {"queueName": "team", "workloadPriorityClass": priority}
    return body


def _cluster(jobs: Jobs, job: str) -> dict:
    found = [rc for rc in jobs.rayclusters() if rc["metadata"]["labels"]["kuberl.io/job"] == job]
    return found[0] if found else {}


def _report_checkpoint(jobs: Jobs, name: str, step: int) -> None:
    """What the runtime's reporter writes with each checkpoint."""
    from datetime import UTC, datetime

    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "progress": {"globalStep": step, "lastUpdateTime": now},
        "checkpoint": {"latestStep": step, "latestPath": f"/ck/global_step_{step}"},
    }
    jobs.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, jobs.namespace, PLURAL, name, {"status": status}
    )


def _submitted(dashboard: FakeDashboard, sid: str, timeout: float = 120) -> None:
    wait_for(f"Ray job {sid} submitted", lambda: sid in dashboard.submissions, timeout=timeout)


def test_admission_and_quota_wait(dashboard_jobs, dashboard, queue, tmp_path):
    jobs = dashboard_jobs
    jobs.apply(queued_job("first", tmp_path, queue["low"]))
    _submitted(dashboard, "first-1")
    jobs.wait_phase("first", "Running")
    assert jobs.condition("first", "Admitted")["status"] == "True"
    assert jobs.condition("first", "Queued")["status"] == "False"
    rc = _cluster(jobs, "first")
    assert rc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team"
    assert rc["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == queue["low"]
    assert rc["spec"].get("suspend") is False  # Kueue admitted it

    # Same priority, no room left: the second waits, its cluster suspended and nothing submitted.
    jobs.apply(queued_job("second", tmp_path, queue["low"]))
    wait_for("second queued", lambda: jobs.condition("second", "Queued").get("status") == "True")
    wait_for("second's cluster", lambda: _cluster(jobs, "second"))
    assert _cluster(jobs, "second")["spec"]["suspend"] is True
    assert jobs.condition("second", "Admitted")["reason"] == "WaitingForAdmission"
    assert jobs.status("second")["phase"] == "Provisioning"
    assert "second-1" not in dashboard.submissions

    dashboard.finish("first-1")
    jobs.wait_phase("first", "Succeeded")  # its RayCluster is deleted: the quota frees up
    _submitted(dashboard, "second-1")
    dashboard.finish("second-1")
    status = jobs.wait_phase("second", "Succeeded")
    assert jobs.condition("second", "Admitted")["status"] == "True"
    assert status["restarts"] == 0 and len(status["attempts"]) == 1


def test_preemption_is_not_a_failure_and_resumes_from_the_checkpoint(
    dashboard_jobs, dashboard, queue, tmp_path
):
    jobs = dashboard_jobs
    jobs.apply(queued_job("low", tmp_path, queue["low"]))
    _submitted(dashboard, "low-1")
    jobs.wait_phase("low", "Running")
    _report_checkpoint(jobs, "low", 3)
    wait_for("checkpoint seen", lambda: jobs.condition("low", "CheckpointAvailable").get("status")
             == "True")  # fmt: skip
    low_cluster = _cluster(jobs, "low")["metadata"]["name"]

    jobs.apply(queued_job("high", tmp_path, queue["high"]))

    def evicted() -> dict | None:
        attempts = jobs.status("low").get("attempts") or []
        return next((a for a in attempts if a.get("reason") == "Evicted"), None)

    attempt = wait_for("the low-priority attempt evicted", evicted, timeout=120)
    assert attempt["result"] == "Stopped" and attempt["index"] == 1
    assert jobs.status("low")["restarts"] == 0, "a preemption must not use the retry budget"
    assert dashboard.status("low-1") == "STOPPED"
    _submitted(dashboard, "high-1")
    dashboard.finish("high-1")
    jobs.wait_phase("high", "Succeeded")

    _submitted(dashboard, "low-2")  # re-admitted once the high-priority job left
    dashboard.finish("low-2")
    status = jobs.wait_phase("low", "Succeeded")
    assert status["restarts"] == 0
    first, second = status["attempts"][0], status["attempts"][-1]
    assert first["reason"] == "Evicted" and second["result"] == "Succeeded"
    assert second["resumedFromStep"] == 3
    assert first["rayCluster"] == second["rayCluster"] == low_cluster, "kept its queue place"
