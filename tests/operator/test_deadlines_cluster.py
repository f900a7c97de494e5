"""Timeouts on the real control plane: a job whose pods cannot be scheduled fails its attempt at
preRunningDeadlineSeconds with the scheduler's reason; a running job that stops sending progress
heartbeats is stopped and retried from its checkpoint (NoProgress). The Ray side is the fake
Jobs API (support/fake_dashboard.py); the test plays the runtime by writing status.progress.
"""

from datetime import UTC, datetime

import pytest

from support.rljobs import GROUP, PLURAL, VERSION, Jobs, fake_job, wait_for

pytestmark = pytest.mark.cluster


def _attempt(jobs: Jobs, name: str, reason: str) -> dict | None:
    return next((a for a in jobs.status(name).get("attempts") or [] if a.get("reason") == reason),
                None)  # fmt: skip


def test_unschedulable_pods_fail_the_attempt_at_the_pre_running_deadline(
    dashboard_jobs, dashboard, tmp_path
):
    jobs = dashboard_jobs
    body = fake_job("stuck", tmp_path, "fake-steps-1-1", preRunningDeadlineSeconds=20)
    body["spec"]["head"] = {"nodeSelector": {"kuberl.io/pool": "no-such-pool"}}
    jobs.apply(body)
    attempt = wait_for(
        "the attempt failed at its deadline",
        lambda: _attempt(jobs, "stuck", "PreRunningDeadlineExceeded"),
        timeout=300,
    )
    assert attempt["result"] == "Failed" and attempt["index"] == 1
    assert "preRunningDeadlineSeconds=20" in attempt["message"]
    # Why it was not ready (Unschedulable, once the scheduler got to the pod; on a loaded
    # machine it may still say provisioning: the harness test pins the reason text).
    assert "RayCluster not ready (" in attempt["message"], attempt["message"]
    assert dashboard.submissions == []


def test_a_silent_run_is_stopped_and_resumed_from_its_checkpoint(
    dashboard_jobs, dashboard, tmp_path
):
    jobs = dashboard_jobs
    jobs.apply(fake_job("hung", tmp_path, "fake-steps-1-1", progressDeadlineSeconds=15))
    wait_for("hung-1 submitted", lambda: "hung-1" in dashboard.submissions, timeout=300)
    jobs.wait_phase("hung", "Running")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "progress": {"globalStep": 7, "lastUpdateTime": now},
        "checkpoint": {"latestStep": 7, "latestPath": "/ck/global_step_7"},
    }
    jobs.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, jobs.namespace, PLURAL, "hung", {"status": status}
    )
    attempt = wait_for("NoProgress", lambda: _attempt(jobs, "hung", "NoProgress"), timeout=300)
    assert attempt["result"] == "Failed"
    assert "progressDeadlineSeconds=15" in attempt["message"]
    assert dashboard.status("hung-1") == "STOPPED", "the hung Ray job is stopped, not leaked"
    wait_for("hung-2 submitted", lambda: "hung-2" in dashboard.submissions, timeout=300)
    second = jobs.status("hung")["attempts"][-1]
    assert second["index"] == 2 and second["resumedFromStep"] == 7
