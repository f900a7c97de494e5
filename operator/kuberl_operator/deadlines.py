"""Timeouts on the way in and during the run: pure decisions plus a per-attempt step clock.

* ``preRunningDeadlineSeconds``: from the attempt's start, or its Kueue admission when later
  (queue time is not the job's fault), until the Ray job reports RUNNING.
* ``progressDeadlineSeconds``: the longest silence between two progress heartbeats of a running
  attempt. Unset, it is derived: ``multiplier`` × the median seconds per step observed in this
  attempt, never below ``floor``; before the attempt's first heartbeat the operator's startup
  deadline applies instead (model load, engine start-up have no history to compare with).
  ``0`` disables it. Heartbeat times are the operator's own (liveness.py).
"""

from collections import deque
from dataclasses import dataclass
from datetime import datetime
from statistics import median

from kuberl_api.platform import RunPolicy

_SAMPLES = 32


@dataclass(frozen=True)
class Overdue:
    reason: str
    message: str


def pre_running_overdue(
    policy: RunPolicy,
    since: datetime | None,
    now: datetime,
    waiting_for: str,
    default: float | None = None,
) -> Overdue | None:
    """Past the job's preRunningDeadlineSeconds, or the operator's ``default`` when it sets none."""
    deadline = policy.pre_running_deadline_seconds or default
    if not deadline or since is None:
        return None
    waited = (now - since).total_seconds()
    if waited <= deadline:
        return None
    message = (
        f"the Ray job was not running {waited:.0f}s after the attempt started "
        f"({_pre_running_basis(policy, deadline)}); last state: {waiting_for}"
    )
    return Overdue("PreRunningDeadlineExceeded", message)


def _pre_running_basis(policy: RunPolicy, deadline: float) -> str:
    if policy.pre_running_deadline_seconds:
        return f"preRunningDeadlineSeconds={policy.pre_running_deadline_seconds}"
    return f"the operator's default pre-running deadline {deadline:.0f}s"


@dataclass(frozen=True)
class ProgressSettings:
    floor_seconds: float = 900.0
    multiplier: float = 10.0


class StepClock:
    """Heartbeats seen per attempt (in memory: after an operator restart the floor applies
    until two new heartbeats arrive), and the deadline they imply."""

    def __init__(self, settings: ProgressSettings) -> None:
        self.settings = settings
        self._last: dict[str, tuple[int, datetime]] = {}
        self._per_step: dict[str, deque[float]] = {}

    def observe(self, key: str, step: int, at: datetime) -> None:
        previous = self._last.get(key)
        if previous is not None and at > previous[1] and step > previous[0]:
            seconds = (at - previous[1]).total_seconds() / (step - previous[0])
            self._per_step.setdefault(key, deque(maxlen=_SAMPLES)).append(seconds)
        if previous is None or at >= previous[1]:
            self._last[key] = (step, at)

    def median_step_seconds(self, key: str) -> float | None:
        samples = self._per_step.get(key)
        return median(samples) if samples else None

    def deadline(self, policy: RunPolicy, key: str) -> float | None:
        explicit = policy.progress_deadline_seconds
        if explicit is not None:
            return float(explicit) or None
        step = self.median_step_seconds(key)
        derived = self.settings.multiplier * step if step is not None else 0.0
        return max(self.settings.floor_seconds, derived)

    def forget(self, key: str) -> None:
        self._last.pop(key, None)
        self._per_step.pop(key, None)


def no_progress(
    policy: RunPolicy,
    clock: StepClock,
    key: str,
    last_heartbeat: datetime | None,
    running_since: datetime | None,
    now: datetime,
    first_heartbeat_seconds: float | None = None,
) -> Overdue | None:
    """A running attempt silent for longer than its progress deadline, explained.

    Before the first heartbeat an explicit deadline counts from RUNNING; a derived one waits
    ``first_heartbeat_seconds`` from RUNNING (model load, engine start-up), None: for ever.
    """
    deadline = clock.deadline(policy, key)
    if deadline is None:
        return None
    since = last_heartbeat
    startup = since is None and policy.progress_deadline_seconds is None
    if since is None and (policy.progress_deadline_seconds is not None or first_heartbeat_seconds):
        since = running_since
    if since is None:
        return None
    if startup:
        assert first_heartbeat_seconds
        deadline = max(deadline, first_heartbeat_seconds)
    silent = (now - since).total_seconds()
    if silent <= deadline:
        return None
    if startup:
        message = (
            f"no progress heartbeat {silent:.0f}s after the Ray job started running (the "
            f"operator's first-heartbeat deadline {deadline:.0f}s: a hang in start-up or model "
            "load); stopping to resume"
        )
        return Overdue("NoProgress", message)
    step = clock.median_step_seconds(key)
    basis = (
        f"progressDeadlineSeconds={policy.progress_deadline_seconds}"
        if policy.progress_deadline_seconds is not None
        else f"derived deadline {deadline:.0f}s"
        + (f" (median step {step:.1f}s)" if step is not None else " (floor)")
    )
    message = f"no progress heartbeat for {silent:.0f}s ({basis}); stopping to resume"
    return Overdue("NoProgress", message)
