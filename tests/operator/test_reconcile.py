"""The level-triggered reconcile against in-memory Kubernetes and Ray: every lifecycle path."""

import pytest

from kuberl_api.plan import RunPlan


def plan_of(submission):
    return RunPlan.from_json(submission["runtime_env"]["env_vars"]["KUBERL_PLAN_JSON"])


def test_invalid_spec_lists_every_problem_and_creates_nothing(harness):
    harness.set_spec(
        {
            "spec.workerPools[0].accelerator.perNode": 0,
            "spec.backend_config.data.train_batch_sizee": 8,
        }
    )
    status = harness.reconcile()
    validated = harness.condition("Validated")
    assert validated["status"] == "False" and validated["reason"] == "InvalidSpec"
    assert "train_batch_sizee" in validated["message"]
    assert "did you mean" in validated["message"] or "train_batch_size" in validated["message"]
    assert status["phase"] == "Failed"
    assert harness.condition("Failed")["reason"] == "InvalidSpec"
    assert harness.kube.created == [] and harness.ray.submissions == []


def test_fixing_an_invalid_spec_starts_the_job(harness):
    harness.set_spec({"spec.backend_config.data.train_batch_sizee": 8})
    harness.reconcile()
    harness.set_spec({"spec.backend_config.data": {"train_files": "/d/t.parquet",
                                                   "train_batch_size": 8}})  # fmt: skip
    status = harness.reconcile()
    assert status["phase"] == "Provisioning"
    assert harness.condition("Failed")["status"] == "False"


def test_happy_path_provisions_submits_runs_and_cleans_up(harness):
    status = harness.reconcile()
    assert status["phase"] == "Provisioning"
    assert ("RayCluster", "grpo-a1") in harness.kube.created
    assert {("ServiceAccount", "grpo-runtime"), ("Role", "grpo-runtime")} <= set(
        harness.kube.created
    )
    assert harness.condition("ClusterReady")["status"] == "False"
    assert harness.ray.submissions == []

    harness.make_cluster_ready()
    status = harness.reconcile()
    assert harness.condition("ClusterReady")["status"] == "True"
    assert status["phase"] == "Running"
    [submission] = harness.ray.submissions
    assert submission["submission_id"] == "grpo-1"
    assert submission["metadata"]["kuberl.io/attempt"] == "1"
    assert plan_of(submission).placement.nnodes == 1

    harness.ray.jobs["grpo-1"]["status"] = "RUNNING"
    harness.report_progress(3, checkpoint=2)
    harness.reconcile()
    assert harness.condition("Running")["status"] == "True"
    assert harness.condition("CheckpointAvailable")["status"] == "True"
    assert harness.status["attempts"][0]["lastStep"] == 3

    harness.ray.finish("grpo-1", "SUCCEEDED", 0)
    status = harness.reconcile()
    assert status["phase"] == "Succeeded"
    assert harness.condition("Succeeded")["status"] == "True"
    assert status["attempts"][0]["result"] == "Succeeded"
    assert harness.kube.rayclusters == {}
    assert status["completionTime"]


def test_reconcile_twice_changes_nothing(harness):
    harness.run_until_running()
    patches = len(harness.kube.status_patches)
    created = list(harness.kube.created)
    harness.reconcile()
    harness.reconcile()
    assert len(harness.kube.status_patches) == patches
    assert harness.kube.created == created and len(harness.ray.submissions) == 1


def test_operator_killed_before_writing_status_submits_once(harness):
    harness.reconcile()
    harness.make_cluster_ready()
    harness.kube.fail_next_patch = True  # submitted, then "killed" before the status write
    with pytest.raises(RuntimeError):
        harness.reconcile()
    assert "rayJob" not in harness.status
    harness.reconciler = harness.new_reconciler()
    harness.reconcile()
    assert harness.status["rayJob"]["submissionId"] == "grpo-1"
    assert len(harness.ray.submissions) == 1
    assert harness.kube.created.count(("RayCluster", "grpo-a1")) == 1


def test_failed_attempt_restarts_after_backoff_and_resumes(harness):
    sid = harness.run_until_running()
    harness.report_progress(5, checkpoint=4)
    harness.reconcile()
    harness.ray.finish(sid, "FAILED", 1, logs="Traceback\nRuntimeError: boom")
    status = harness.reconcile()
    assert status["phase"] == "Restarting"
    assert status["restarts"] == 1
    assert harness.condition("Restarting")["status"] == "True"
    assert status["attempts"][0]["reason"] == "AppFailed"
    assert "boom" in status["attempts"][0]["message"]
    assert "grpo-a1" not in harness.kube.rayclusters

    harness.advance(5)  # backoff is 10s
    assert harness.reconcile()["phase"] == "Restarting"
    harness.advance(6)
    status = harness.reconcile()
    assert status["phase"] == "Provisioning"
    assert status["attempts"][1]["index"] == 2
    assert status["attempts"][1]["resumedFromStep"] == 4
    assert harness.condition("Restarting")["status"] == "False"
    harness.make_cluster_ready()
    harness.reconcile()
    second = harness.ray.submissions[1]
    assert second["submission_id"] == "grpo-2"
    assert plan_of(second).trainer.resume_mode == "auto"


def test_backoff_doubles(harness):
    for restart, delay in ((1, 10), (2, 20)):
        sid = harness.run_until_running()
        harness.report_progress(restart)
        harness.reconcile()
        harness.ray.finish(sid, "FAILED", 1)
        status = harness.reconcile()
        assert status["restarts"] == restart
        assert harness.condition("Restarting")["message"].endswith(f"in {delay}s")
        harness.advance(delay)


def test_backoff_limit_exhausted_fails_the_job(harness):
    harness.set_spec({"spec.runPolicy": {"backoffLimit": 1}})
    for _ in range(2):
        sid = harness.run_until_running()
        harness.ray.finish(sid, "STOPPED")  # stopped from outside: an infra failure
        harness.reconcile()
        harness.advance(100)
    assert harness.status["phase"] == "Failed"
    assert harness.condition("Failed")["reason"] == "RetryLimitExceeded"
    assert len(harness.ray.submissions) == 2
    harness.reconcile()
    assert len(harness.ray.submissions) == 2


def test_config_error_fails_without_retry(harness):
    sid = harness.run_until_running()
    harness.ray.finish(sid, "FAILED", 2, logs="error: spec.backend_config: bad")
    status = harness.reconcile()
    assert status["phase"] == "Failed"
    assert harness.condition("Failed")["reason"] == "InvalidConfig"
    assert status["restarts"] == 0


def test_two_attempts_failing_before_the_first_step_stop_the_job(harness):
    harness.set_spec({"spec.runPolicy": {"backoffLimit": 10}})
    for _ in range(2):
        sid = harness.run_until_running()
        harness.ray.finish(sid, "FAILED", 1, logs="ImportError: no module")
        harness.reconcile()
        harness.advance(100)
    assert harness.status["phase"] == "Failed"
    assert harness.condition("Failed")["reason"] == "FailedBeforeFirstStep"
    assert harness.status["restarts"] == 1


def test_head_restart_fails_the_attempt(harness):
    harness.run_until_running()
    harness.ray.session = "session_2"
    status = harness.reconcile()
    assert status["phase"] == "Restarting"
    assert status["attempts"][0]["reason"] == "HeadRestarted"


def test_unknown_job_counts_as_head_restart(harness):
    sid = harness.run_until_running()
    del harness.ray.jobs[sid]
    assert harness.reconcile()["attempts"][0]["reason"] == "HeadRestarted"


def test_dashboard_unreachable_beyond_grace_fails_the_attempt(harness):
    harness.run_until_running()
    harness.ray.reachable = False
    assert harness.reconcile()["phase"] == "Running"
    harness.advance(31)
    status = harness.reconcile()
    assert status["phase"] == "Restarting"
    assert status["attempts"][0]["reason"] == "DashboardUnreachable"


def test_suspend_stops_deletes_cluster_and_unsuspend_resumes(harness):
    sid = harness.run_until_running()
    harness.report_progress(6, checkpoint=6)
    harness.set_spec({"spec.runPolicy": {"suspend": True}})
    status = harness.reconcile()
    assert status["phase"] == "Suspended"
    assert harness.condition("Suspended")["status"] == "True"
    assert harness.ray.stopped == [sid]
    assert harness.kube.rayclusters == {}
    assert status["attempts"][0]["result"] == "Stopped"
    assert harness.reconcile()["phase"] == "Suspended"

    harness.set_spec({"spec.runPolicy": {"suspend": False}})
    status = harness.reconcile()
    assert status["phase"] == "Provisioning"
    assert harness.condition("Suspended")["reason"] == "Resumed"
    assert status["attempts"][1]["resumedFromStep"] == 6
    assert status["restarts"] == 0


def test_suspended_at_creation_creates_nothing(harness):
    harness.set_spec({"spec.runPolicy": {"suspend": True}})
    assert harness.reconcile()["phase"] == "Suspended"
    assert harness.kube.created == []


def test_active_deadline_fails_the_job(harness):
    harness.set_spec({"spec.runPolicy": {"activeDeadlineSeconds": 60}})
    sid = harness.run_until_running()
    harness.advance(61)
    status = harness.reconcile()
    assert status["phase"] == "Failed"
    assert harness.condition("Failed")["reason"] == "DeadlineExceeded"
    assert harness.ray.stopped == [sid]
    assert harness.kube.rayclusters == {}


def test_ttl_deletes_the_finished_job(harness):
    harness.set_spec({"spec.runPolicy": {"ttlSecondsAfterFinished": 30}})
    sid = harness.run_until_running()
    harness.ray.finish(sid, "SUCCEEDED", 0)
    harness.reconcile()
    harness.advance(29)
    harness.reconcile()
    assert harness.name in harness.kube.jobs
    harness.advance(2)
    harness.reconcile()
    assert harness.name not in harness.kube.jobs


@pytest.mark.parametrize(
    ("policy", "outcome", "kept"),
    [
        ("DeleteCluster", "FAILED", False),
        ("KeepOnFailure", "FAILED", True),
        ("KeepOnFailure", "SUCCEEDED", False),
        ("KeepAll", "SUCCEEDED", True),
    ],
)
def test_cleanup_policy(harness, policy, outcome, kept):
    harness.set_spec({"spec.runPolicy": {"cleanupPolicy": policy, "backoffLimit": 0}})
    sid = harness.run_until_running()
    harness.report_progress(1)
    harness.ray.finish(sid, outcome, 0 if outcome == "SUCCEEDED" else 1)
    harness.reconcile()
    assert ("grpo-a1" in harness.kube.rayclusters) is kept


def test_unschedulable_pod_surfaces_as_cluster_ready_reason(harness):
    harness.reconcile()
    harness.kube.pods["grpo-a1"] = [
        {
            "metadata": {"name": "grpo-a1-gpu-worker-x"},
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/6 nodes are available: 6 Insufficient nvidia.com/gpu.",
                    }
                ]
            },
        }
    ]
    status = harness.reconcile()
    ready = harness.condition("ClusterReady")
    assert ready["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in ready["message"]
    assert "Insufficient" in status["message"]


def test_deleting_a_running_job_stops_its_ray_job(harness):
    sid = harness.run_until_running()
    harness.reconciler.finalize(harness.job)
    assert harness.ray.stopped == [sid]


def test_every_transition_is_an_event(harness):
    sid = harness.run_until_running()
    harness.ray.finish(sid, "SUCCEEDED", 0)
    harness.reconcile()
    reasons = [event.reason for event in harness.events]
    for expected in ("Valid", "AttemptStarted", "RayClusterReady", "Submitted", "RayJobRunning",
                     "RayJobSucceeded", "ClusterDeleted"):  # fmt: skip
        assert expected in reasons


def test_runtime_owned_fields_are_never_written(harness):
    harness.run_until_running()
    harness.report_progress(2, checkpoint=2)
    harness.reconcile()
    for patch in harness.kube.status_patches:
        assert "progress" not in patch and "checkpoint" not in patch


def test_a_running_job_is_still_followed_when_pod_readiness_blinks(harness):
    sid = harness.run_until_running()
    for rc in harness.kube.rayclusters.values():
        rc["status"]["conditions"][0]["status"] = "False"  # HeadPodReady
    harness.ray.finish(sid, "SUCCEEDED", 0)
    harness.reconcile()
    assert harness.status["phase"] == "Succeeded"
