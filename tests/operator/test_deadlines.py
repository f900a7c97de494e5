"""Timeouts: preRunningDeadlineSeconds and hang detection (NoProgress), on the fake harness."""

from datetime import UTC, datetime, timedelta

import pytest

from kuberl_api.platform import RunPolicy
from kuberl_operator.deadlines import ProgressSettings, StepClock, no_progress
from support.manifests import with_changes


def _policy(harness, **run_policy):
    harness.set_spec({"spec.runPolicy": {"backoffLimit": 3, **run_policy}})


def test_an_attempt_stuck_provisioning_fails_with_a_clear_reason(harness):
    _policy(harness, preRunningDeadlineSeconds=300)
    harness.reconcile()
    harness.kube.pods["grpo-a1"] = [
        {
            "metadata": {"name": "grpo-a1-head"},
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes have nvidia.com/gpu",
                    }
                ]
            },
        }
    ]
    harness.advance(200)
    assert harness.reconcile()["phase"] == "Provisioning"
    harness.advance(200)
    status = harness.reconcile()
    attempt = status["attempts"][0]
    assert attempt["result"] == "Failed"
    assert attempt["reason"] == "PreRunningDeadlineExceeded"
    assert "Unschedulable" in attempt["message"] and "0/3 nodes" in attempt["message"]
    assert status["phase"] == "Restarting" and status["restarts"] == 1
    assert "grpo-a1" not in harness.kube.rayclusters


def test_a_ray_job_pending_too_long_is_stopped_and_failed(harness):
    _policy(harness, preRunningDeadlineSeconds=120)
    harness.reconcile()
    harness.make_cluster_ready()
    harness.reconcile()
    assert harness.ray.jobs["grpo-1"]["status"] == "PENDING"
    harness.advance(121)
    status = harness.reconcile()
    assert status["attempts"][0]["reason"] == "PreRunningDeadlineExceeded"
    assert harness.ray.stopped == ["grpo-1"]


def test_without_the_field_the_operators_default_pre_running_deadline_applies(harness):
    harness.reconcile()
    harness.advance(3600)
    assert harness.reconcile()["phase"] == "Provisioning"
    harness.advance(2)
    attempt = harness.reconcile()["attempts"][0]
    assert attempt["reason"] == "PreRunningDeadlineExceeded"
    assert "the operator's default pre-running deadline 3600s" in attempt["message"]


def test_a_running_job_that_reached_running_in_time_is_not_failed(harness):
    _policy(harness, preRunningDeadlineSeconds=60)
    harness.run_until_running()
    harness.advance(3600)
    harness.report_progress(5)
    assert harness.reconcile()["attempts"][0]["result"] == "Running"


def test_a_silent_run_is_stopped_and_retried_from_its_checkpoint(harness):
    harness.config = harness.config.__class__(
        backoff_base=10, backoff_max=60, progress_deadline_floor=60
    )
    harness.reconciler = harness.new_reconciler()
    sid = harness.run_until_running()
    for step in range(1, 6):  # 10 s per step
        harness.advance(10)
        harness.report_progress(step, checkpoint=step)
        harness.reconcile()
    harness.advance(59)  # silence under the floor (10 × 10 s = 100 s > 60 s floor)
    assert harness.reconcile()["attempts"][0]["result"] == "Running"
    harness.advance(42)  # 101 s of silence: a hung collective
    status = harness.reconcile()
    attempt = status["attempts"][0]
    assert attempt["result"] == "Failed" and attempt["reason"] == "NoProgress"
    assert "median step 10.0s" in attempt["message"]
    assert harness.ray.stopped == [sid]
    assert status["phase"] == "Restarting"
    harness.advance(60)
    status = harness.reconcile()
    assert status["attempts"][-1]["index"] == 2
    assert status["attempts"][-1]["resumedFromStep"] == 5


def test_an_explicit_progress_deadline_counts_from_running_before_any_heartbeat(harness):
    _policy(harness, progressDeadlineSeconds=300)
    harness.run_until_running()
    harness.advance(299)
    assert harness.reconcile()["attempts"][0]["result"] == "Running"
    harness.advance(2)
    attempt = harness.reconcile()["attempts"][0]
    assert attempt["reason"] == "NoProgress"
    assert "progressDeadlineSeconds=300" in attempt["message"]


def test_progress_deadline_zero_turns_hang_detection_off(harness):
    _policy(harness, progressDeadlineSeconds=0)
    harness.run_until_running()
    harness.report_progress(1)
    harness.advance(30 * 24 * 3600)
    assert harness.reconcile()["attempts"][0]["result"] == "Running"


def test_before_the_first_heartbeat_the_startup_deadline_applies(harness):
    harness.run_until_running()
    harness.advance(3600)  # model loading has no history to judge it by: an hour
    assert harness.reconcile()["attempts"][0]["result"] == "Running"
    harness.advance(2)
    attempt = harness.reconcile()["attempts"][0]
    assert attempt["reason"] == "NoProgress"
    assert "first-heartbeat deadline 3600s" in attempt["message"]


def test_a_heartbeat_in_the_future_does_not_hold_detection_off(harness):
    harness.run_until_running()
    harness.report_progress(1)
    far = (harness.now + timedelta(days=365)).strftime("%Y-%m-%dT%H:%M:%SZ")
    harness.job["status"]["progress"]["lastUpdateTime"] = far
    harness.reconcile()  # seen now, by the operator's clock
    harness.advance(900)
    assert harness.reconcile()["attempts"][0]["result"] == "Running"
    harness.advance(2)
    attempt = harness.reconcile()["attempts"][0]
    assert attempt["reason"] == "NoProgress" and "(floor)" in attempt["message"]


def test_a_changing_heartbeat_keeps_a_run_alive_whatever_its_timestamps(harness):
    harness.run_until_running()
    stamp = "2020-01-01T00:00:00Z"
    for step in range(1, 30):  # a runtime whose clock is years behind, beating every 10 min
        harness.report_progress(step)
        harness.job["status"]["progress"]["lastUpdateTime"] = stamp
        harness.advance(600)
        assert harness.reconcile()["attempts"][0]["result"] == "Running"


@pytest.mark.parametrize(
    ("beats", "expected"),
    [
        ([], 900.0),  # no history: the floor
        ([(0, 0), (1, 10), (2, 20), (3, 30)], 900.0),  # 10 × 10 s is under the floor
        ([(0, 0), (1, 200), (2, 400), (4, 800), (5, 5000)], 2000.0),  # median 200 s, one outlier
    ],
)
def test_the_derived_deadline_is_ten_times_the_median_step_with_a_floor(beats, expected):
    clock = StepClock(ProgressSettings(floor_seconds=900))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for step, seconds in beats:
        clock.observe("job/1", step, start + timedelta(seconds=seconds))
    assert clock.deadline(RunPolicy(), "job/1") == expected


def test_no_progress_names_the_silence_and_the_basis():
    clock = StepClock(ProgressSettings(floor_seconds=60))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    overdue = no_progress(RunPolicy(), clock, "k", start, start, start + timedelta(seconds=61))
    assert overdue is not None and overdue.reason == "NoProgress"
    assert "61s" in overdue.message and "floor" in overdue.message
    assert no_progress(RunPolicy(), clock, "k", start, start, start + timedelta(seconds=60)) is None


def test_the_new_fields_are_in_the_schema():
    from kuberl_api.job import RLTrainingJob
    from support.manifests import valid_manifest

    job = RLTrainingJob.model_validate(
        with_changes(
            valid_manifest(),
            {"spec.runPolicy": {"preRunningDeadlineSeconds": 600, "progressDeadlineSeconds": 0}},
        )
    )
    assert job.spec.run_policy.pre_running_deadline_seconds == 600
    assert job.spec.run_policy.progress_deadline_seconds == 0
