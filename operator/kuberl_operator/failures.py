"""Why an attempt failed, and whether (and when) another one is worth starting.

Three classes, as users of Kubeflow and KubeRay know them:

* ``config``: the runtime refused its configuration (``kuberl train`` exits 2). Retrying
  cannot help, so the job fails at once.
* ``infra``: the platform lost the attempt — head restarted, cluster deleted, dashboard gone,
  the Ray job stopped from outside. Retried up to ``backoffLimit``.
* ``app``: the training program failed. Retried up to ``backoffLimit``, but two attempts in a
  row that fail before reporting a single step stop the job (a crash loop burns no budget).
"""

from dataclasses import dataclass
from enum import StrEnum

from kuberl_operator.ray_jobs import JobInfo

CONFIG_EXIT_CODE = 2
_INFRA_ERROR_TYPES = {
    "JOB_SUPERVISOR_ACTOR_DIED",
    "JOB_SUPERVISOR_ACTOR_START_FAILURE",
    "JOB_SUPERVISOR_ACTOR_START_TIMEOUT",
}
# StorageAccessError: the object store refused the job's credentials (kuberl_runtime.checkpoint).
_CONFIG_MARKERS = (
    "kuberl_api.validation.problems.SpecInvalid",
    "SpecInvalid:",
    "StorageAccessError:",
)


class FailureClass(StrEnum):
    CONFIG = "config"
    INFRA = "infra"
    APP = "app"


@dataclass(frozen=True)
class Failure:
    reason: str
    message: str
    cls: FailureClass


def classify_ray_failure(info: JobInfo, logs_tail: str) -> Failure:
    """A Ray job that ended FAILED or STOPPED, explained from its status and log tail."""
    tail = last_lines(logs_tail)
    detail = "; ".join(part for part in (info.message.strip(), tail) if part)
    if info.status == "STOPPED":
        return Failure("RayJobStopped", detail or "the Ray job was stopped", FailureClass.INFRA)
    if info.driver_exit_code == CONFIG_EXIT_CODE or any(m in logs_tail for m in _CONFIG_MARKERS):
        return Failure("InvalidConfig", detail, FailureClass.CONFIG)
    if info.error_type in _INFRA_ERROR_TYPES:
        return Failure("RayInfrastructureError", detail, FailureClass.INFRA)
    return Failure("AppFailed", detail or "the training program failed", FailureClass.APP)


def last_lines(text: str, lines: int = 5, max_chars: int = 600) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[-max_chars:]


def backoff_seconds(restarts: int, base: float, ceiling: float) -> float:
    """Delay before restart number ``restarts`` (1-based): base, 2×base, 4×base … ceiling."""
    assert restarts >= 1
    return min(base * 2 ** (restarts - 1), ceiling)


@dataclass(frozen=True)
class RetryVerdict:
    retry: bool
    reason: str
    """Why the job stops, when it does (a Failed condition reason)."""


def retry_verdict(
    failure: Failure,
    failed_attempts: int,
    backoff_limit: int,
    made_progress: bool,
    previous_failure_without_progress: bool,
) -> RetryVerdict:
    """``failed_attempts`` counts this one; ``backoffLimit`` retries follow the first failure."""
    if failure.cls is FailureClass.CONFIG:
        return RetryVerdict(False, failure.reason)
    if failed_attempts > backoff_limit:
        return RetryVerdict(False, "RetryLimitExceeded")
    if failure.cls is FailureClass.APP and not made_progress and previous_failure_without_progress:
        return RetryVerdict(False, "FailedBeforeFirstStep")
    return RetryVerdict(True, failure.reason)
