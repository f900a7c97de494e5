"""Is the attempt alive: its heartbeats as the operator saw them, and the deadlines they imply.

Silence is judged by the operator's own clock: a heartbeat is a change of the runtime's
``progress`` (its step or ``lastUpdateTime``), timed when the operator first sees it. The
runtime's timestamps only tell an earlier attempt's heartbeat from this one's; a timestamp in
the future, or one never advancing, cannot hold detection off. Before the first heartbeat of a
running attempt a startup deadline applies (``WaitDeadlines.first_heartbeat_seconds``, unless
the job sets ``progressDeadlineSeconds``): a hang in model load or NCCL start-up is caught too.
"""

from datetime import datetime

from kuberl_api.job import Attempt
from kuberl_operator import conditions as cond
from kuberl_operator.config import OperatorConfig
from kuberl_operator.deadlines import (
    Overdue,
    ProgressSettings,
    StepClock,
    no_progress,
    pre_running_overdue,
)
from kuberl_operator.initializing import observe_initializing
from kuberl_operator.metrics import Metrics
from kuberl_operator.state import JobState

_Beat = tuple[int, str | None]


class Liveness:
    def __init__(self, config: OperatorConfig, metrics: Metrics) -> None:
        self.config, self.metrics = config, metrics
        self.step_clock = StepClock(ProgressSettings(config.progress_deadline_floor))
        self._seen: dict[str, tuple[_Beat, datetime | None]] = {}
        self._first_step_seen: set[str] = set()

    def track(self, state: JobState, attempt: Attempt) -> None:
        """Record a heartbeat when the runtime's progress changed since the last reconcile."""
        progress = state.status.progress
        if progress is None:
            return
        observe_initializing(state)
        self.metrics.global_step.labels(state.ref.namespace, state.ref.name).set(
            progress.global_step
        )
        key = clock_key(state, attempt)
        beat: _Beat = (progress.global_step, progress.last_update_time)
        previous = self._seen.get(key)
        if previous is not None and previous[0] == beat:
            return
        updated = cond.parse_time(progress.last_update_time)
        started = cond.parse_time(attempt.start_time)
        if previous is None and (updated is None or started is None or updated < started):
            self._seen[key] = (beat, None)  # an earlier attempt's last word: not a heartbeat
            return
        self._seen[key] = (beat, state.now)
        attempt.last_step = progress.global_step
        self.step_clock.observe(key, progress.global_step, state.now)
        if key not in self._first_step_seen and started is not None:
            self._first_step_seen.add(key)
            self.metrics.time_to_first_step.observe((state.now - started).total_seconds())

    def last_heartbeat(self, state: JobState, attempt: Attempt) -> datetime | None:
        seen = self._seen.get(clock_key(state, attempt))
        return seen[1] if seen is not None else None

    def forget(self, state: JobState, attempt: Attempt) -> None:
        key = clock_key(state, attempt)
        self.step_clock.forget(key)
        self._seen.pop(key, None)
        self._first_step_seen.discard(key)

    def overdue(self, state: JobState, attempt: Attempt) -> Overdue | None:
        """A running attempt past its pre-running, first-heartbeat or progress deadline."""
        if attempt.result != "Running":
            return None
        ray_job = state.status.ray_job if state.submitted(attempt) else None
        if ray_job is None or ray_job.status in (None, "PENDING"):
            return self._pre_running(state, attempt)
        running = cond.get_condition(state.status, cond.RUNNING)
        running_since = (
            cond.parse_time(running.last_transition_time)
            if running is not None and running.status == "True"
            else None
        )
        return no_progress(
            state.run_policy,
            self.step_clock,
            clock_key(state, attempt),
            self.last_heartbeat(state, attempt),
            running_since,
            state.now,
            self.config.waits.first_heartbeat_seconds,
        )

    def _pre_running(self, state: JobState, attempt: Attempt) -> Overdue | None:
        ray_job = state.status.ray_job if state.submitted(attempt) else None
        ready = cond.get_condition(state.status, cond.CLUSTER_READY)
        if ready is not None and ready.status != "True":
            waiting = f"RayCluster not ready ({ready.reason}: {ready.message})"
        else:
            waiting = f"Ray job {ray_job.status if ray_job else 'not submitted'}"
        since = cond.parse_time(attempt.start_time)
        admitted = cond.get_condition(state.status, cond.ADMITTED)
        if admitted is not None and admitted.status == "True":
            since = max(filter(None, (since, cond.parse_time(admitted.last_transition_time))))
        default = self.config.waits.pre_running_seconds
        return pre_running_overdue(state.run_policy, since, state.now, waiting, default)


def clock_key(state: JobState, attempt: Attempt) -> str:
    return f"{state.ref.uid}/{attempt.index}"
