"""The Initializing condition from the runtime's real initializer heartbeat.

The payloads are what ``kuberl_runtime.reporting.k8s.StatusReporter`` sends (``on_initializing``
then the trainer's ``on_start``), merged into the job's status as the API server does; the
operator reads the job as a reconcile does and tracks its heartbeat (``Liveness.track``).
"""

from datetime import UTC, datetime
from typing import Any

from kuberl_api.job import Attempt
from kuberl_operator import conditions as cond
from kuberl_operator.config import OperatorConfig
from kuberl_operator.liveness import Liveness
from kuberl_operator.metrics import Metrics
from kuberl_operator.state import JobState
from kuberl_runtime.reporting.k8s import StatusReporter

NOW = datetime(2026, 11, 28, 11, 0, tzinfo=UTC)
MIB = 1 << 20


def reconcile(liveness: Liveness, status: dict[str, Any]) -> JobState:
    body = {"metadata": {"name": "grpo", "namespace": "team", "uid": "u1"}, "status": status}
    state = JobState.read(body, NOW)
    attempt = Attempt.model_validate(
        {"index": 1, "submissionId": "s1", "startTime": "2026-11-28T10:00:00Z"}
    )
    liveness.track(state, attempt)
    return state


def heartbeat(
    liveness: Liveness, status: dict[str, Any], patch: dict[str, Any], seen: JobState | None
) -> JobState:
    """The reporter's patch merged into the job's status as the API server does (beside the
    conditions the previous reconcile, ``seen``, wrote), then a reconcile."""
    status.update(patch)
    if seen is not None:
        status["conditions"] = [c.model_dump(by_alias=True) for c in seen.status.conditions]
    return reconcile(liveness, status)


def condition(state: JobState) -> tuple[str, str, str] | None:
    found = cond.get_condition(state.status, cond.INITIALIZING)
    return None if found is None else (found.status, found.reason, found.message)


def test_initializing_follows_the_initializer_heartbeat_then_the_trainer():
    sent: list[dict[str, Any]] = []
    clock = iter(float(t) for t in range(1_800_000_000, 1_800_000_100, 10))
    reporter = StatusReporter(sent.append, clock=lambda: next(clock))
    liveness = Liveness(OperatorConfig(), Metrics())
    status: dict[str, Any] = {"phase": "Running"}

    reporter.on_initializing(3 * MIB, 12 * MIB)
    state = heartbeat(liveness, status, sent[-1], None)
    assert condition(state) == (
        "True",
        "CopyingInputs",
        "copying remote models and data into the input cache: 3.0 of 12.0 MiB (25%)",
    )
    assert [e.message for e in state.events] == [
        "Initializing=True: copying remote models and data into the input cache: 3.0 of 12.0 "
        "MiB (25%)"
    ]

    reporter.on_initializing(12 * MIB, 12 * MIB)
    state = heartbeat(liveness, status, sent[-1], state)
    assert condition(state) == (
        "True",
        "CopyingInputs",
        "copying remote models and data into the input cache: 12.0 of 12.0 MiB (100%)",
    )
    assert state.events == []  # the message moved, the status did not

    reporter.on_start(start_step=0, total_steps=5)  # the trainer's own first heartbeat
    state = heartbeat(liveness, status, sent[-1], state)
    assert condition(state) == (
        "False",
        "InputsReady",
        "remote models and data are in the input cache",
    )


def test_a_job_without_remote_inputs_never_shows_the_condition():
    sent: list[dict[str, Any]] = []
    reporter = StatusReporter(sent.append)
    reporter.on_start(start_step=0, total_steps=5)
    state = reconcile(Liveness(OperatorConfig(), Metrics()), {"phase": "Running", **sent[-1]})
    assert condition(state) is None
