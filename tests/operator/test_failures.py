"""Failure classification, retry verdicts and backoff; condition bookkeeping."""

from datetime import UTC, datetime, timedelta

import pytest

from kuberl_api.job import RLTrainingJobStatus
from kuberl_operator.conditions import set_condition
from kuberl_operator.failures import (
    Failure,
    FailureClass,
    backoff_seconds,
    classify_ray_failure,
    retry_verdict,
)
from kuberl_operator.ray_jobs import JobInfo


def info(status: str, exit_code=None, error_type=None, message="") -> JobInfo:
    return JobInfo.from_api(
        {
            "submission_id": "j-1",
            "status": status,
            "driver_exit_code": exit_code,
            "error_type": error_type,
            "message": message,
        }
    )


@pytest.mark.parametrize(
    ("job", "logs", "reason", "cls"),
    [
        (info("FAILED", 2), "error: bad key", "InvalidConfig", FailureClass.CONFIG),
        (info("FAILED", 1), "kuberl_api.validation.problems.SpecInvalid: x", "InvalidConfig",
         FailureClass.CONFIG),
        (info("FAILED", 1), "kuberl_runtime.checkpoint.remote.StorageAccessError: listing "
         "s3://b/run: access denied", "InvalidConfig", FailureClass.CONFIG),
        (info("FAILED", 1), "kuberl_runtime.checkpoint.remote.StorageTransferError: uploading",
         "AppFailed", FailureClass.APP),
        (info("FAILED", 1), "RuntimeError: nan", "AppFailed", FailureClass.APP),
        (info("FAILED", None, "JOB_SUPERVISOR_ACTOR_DIED"), "", "RayInfrastructureError",
         FailureClass.INFRA),
        (info("STOPPED"), "", "RayJobStopped", FailureClass.INFRA),
    ],
)  # fmt: skip
def test_classify(job, logs, reason, cls):
    failure = classify_ray_failure(job, logs)
    assert (failure.reason, failure.cls) == (reason, cls)


def test_failure_message_carries_the_log_tail():
    failure = classify_ray_failure(info("FAILED", 1, message="Job failed"), "a\nb\nboom\n")
    assert failure.message == "Job failed; a | b | boom"


@pytest.mark.parametrize(
    ("restarts", "expected"), [(1, 10), (2, 20), (3, 40), (4, 80), (5, 100), (9, 100)]
)
def test_backoff_doubles_up_to_the_ceiling(restarts, expected):
    assert backoff_seconds(restarts, base=10, ceiling=100) == expected


APP = Failure("AppFailed", "", FailureClass.APP)
INFRA = Failure("HeadRestarted", "", FailureClass.INFRA)
CONFIG = Failure("InvalidConfig", "", FailureClass.CONFIG)


@pytest.mark.parametrize(
    ("failure", "failed", "limit", "progress", "previous_stuck", "retry", "reason"),
    [
        (APP, 1, 3, True, False, True, "AppFailed"),
        (APP, 4, 3, True, False, False, "RetryLimitExceeded"),
        (APP, 1, 0, True, False, False, "RetryLimitExceeded"),
        (CONFIG, 1, 3, True, False, False, "InvalidConfig"),
        (APP, 2, 10, False, True, False, "FailedBeforeFirstStep"),
        (APP, 2, 10, False, False, True, "AppFailed"),
        (INFRA, 2, 10, False, True, True, "HeadRestarted"),
    ],
)
def test_retry_verdict(failure, failed, limit, progress, previous_stuck, retry, reason):
    verdict = retry_verdict(failure, failed, limit, progress, previous_stuck)
    assert (verdict.retry, verdict.reason) == (retry, reason)


def test_last_transition_time_moves_only_when_status_flips():
    status = RLTrainingJobStatus()
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    assert set_condition(status, "Running", False, "Pending", "", t0, 1) is not None
    assert set_condition(status, "Running", False, "Pending", "still", t0 + timedelta(1), 2) is None
    [condition] = status.conditions
    assert (condition.last_transition_time, condition.message) == ("2026-01-01T00:00:00Z", "still")
    assert condition.observed_generation == 2
    flipped = set_condition(status, "Running", True, "RayJobRunning", "", t0 + timedelta(2), 2)
    assert flipped is not None and flipped.status == "True"
    assert status.conditions[0].last_transition_time == "2026-01-03T00:00:00Z"


def test_conditions_keep_a_stable_order():
    status = RLTrainingJobStatus()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    for type_ in ("Failed", "Running", "Validated"):
        set_condition(status, type_, False, "X", "", now, 1)
    assert [c.type for c in status.conditions] == ["Validated", "Running", "Failed"]
