"""Suspending a running job without losing the step in flight: stop, wait (bounded), then delete.

``spec.runPolicy.suspend`` used to stop the Ray job and delete the RayCluster in one reconcile,
so the pods were gone before the ranks could save. Now the operator asks the Ray job to stop
(``ray job stop``: the driver gets SIGTERM, the ranks finish the step in flight and save a
checkpoint at it, runtime trainer/preemption.py) and keeps the cluster while the Ray job runs,
for at most ``--stop-grace-seconds``. The ``Suspended`` condition says where it stands:

* ``Stopping``: the stop was asked at the attempt's ``endTime``; every reconcile polls the Ray
  job and the deadline;
* ``RayJobStopped``: the Ray job ended within the grace period (its final status and the latest
  checkpoint step in the message); the cluster was then deleted;
* ``StopDeadlinePassed``: it was still running (or its head did not answer) when the grace
  period ended; the cluster was deleted anyway, and the message names the setting.

Lifting ``suspend`` while the stop is pending changes nothing until it settles: the next attempt
never starts beside ranks that are still saving.
"""

from kuberl_api.job import Attempt
from kuberl_operator import conditions as cond
from kuberl_operator.attempts import AttemptDriver
from kuberl_operator.ray_auth import UnknownTokenKey
from kuberl_operator.ray_jobs import DashboardUnavailable, JobInfo
from kuberl_operator.state import JobState

STOPPING = "Stopping"
STOPPED = "RayJobStopped"
DEADLINE = "StopDeadlinePassed"
SUSPENDED = "Suspended"
SETTING = "--stop-grace-seconds"


def begin(state: JobState, attempts: AttemptDriver, attempt: Attempt) -> bool:
    """Stop the attempt; True when its Ray job was submitted, so the cluster must wait."""
    submitted = state.submitted(attempt)
    attempts.stop(state, attempt, SUSPENDED)
    if not submitted:
        return False
    grace = attempts.config.stop_grace_seconds
    message = (
        f"asked Ray job {attempt.submission_id} to stop (the ranks save a checkpoint at the step "
        f"in flight); RayCluster {attempt.ray_cluster} is deleted once it ended, at most {grace}s "
        f"from now ({SETTING}); latest checkpoint: {_latest(state)}"
    )
    state.condition(cond.SUSPENDED, True, STOPPING, message)
    return True


def pending(state: JobState) -> bool:
    found = cond.get_condition(state.status, cond.SUSPENDED)
    return found is not None and found.reason == STOPPING


def settle(state: JobState, attempts: AttemptDriver) -> bool:
    """Poll a pending stop; True once it ended (ended or past its deadline): the caller
    deletes the cluster. False while it is still waiting."""
    attempt = state.status.attempts[-1]
    asked = cond.parse_time(attempt.end_time) or state.now
    waited = (state.now - asked).total_seconds()
    grace = attempts.config.stop_grace_seconds
    info, ended, seen = _ask(state, attempts, attempt)
    sid = attempt.submission_id
    if ended:
        final = info.status if info is not None else "no longer known to its head"
        message = (
            f"Ray job {sid} ended ({final}) {waited:.0f}s after it was asked to stop; "
            f"latest checkpoint: {_latest(state)}"
        )
        state.condition(cond.SUSPENDED, True, STOPPED, message)
        state.event("Normal", STOPPED, message)
        return True
    if waited >= grace:
        message = (
            f"Ray job {sid} was still {seen} {grace}s after it was asked to stop ({SETTING}); "
            f"RayCluster {attempt.ray_cluster} deleted anyway; latest checkpoint: "
            f"{_latest(state)}"
        )
        state.condition(cond.SUSPENDED, True, DEADLINE, message)
        state.event("Warning", DEADLINE, message)
        return True
    left = grace - waited
    state.status.message = f"suspending: Ray job {sid} ({seen}) is stopping, {left:.0f}s left"
    return False


def _ask(
    state: JobState, attempts: AttemptDriver, attempt: Attempt
) -> tuple[JobInfo | None, bool, str]:
    """The Ray job, whether it ended, and its state in words."""
    try:
        info = attempts.ray_job(state, attempt)
    except (DashboardUnavailable, UnknownTokenKey) as err:
        return None, False, f"unreachable ({str(err)[:200]})"
    if info is not None and state.status.ray_job is not None:
        state.status.ray_job.status = info.status
    if info is None:
        return None, True, "unknown"
    return info, info.terminal, info.status


def _latest(state: JobState) -> str:
    checkpoint = state.status.checkpoint
    if checkpoint is None or checkpoint.latest_step is None:
        return "none yet"
    return f"step {checkpoint.latest_step}"
