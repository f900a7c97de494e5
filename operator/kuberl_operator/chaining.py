"""``spec.dependsOn``: a job starts only once every job it names has Succeeded.

A GRPO job that warm-starts from an SFT job's export (``model.path`` pointing at that job's
``af_output_dir/huggingface``) names it in ``dependsOn``. Until every named RLTrainingJob (same
namespace) has Succeeded the job stays Pending, with the condition ``WaitingForDependency=True``
whose message names the job it waits for and that job's phase; a missing job is waited for (it
may be applied later) up to the operator's deadline (``DependencyNotFound``). A dependency seen
Succeeded is recorded (condition ``DependenciesSucceeded``, message ``seen Succeeded: ...``) and
still counts once deleted (its TTL). When one of them Failed, the job fails at once
(``DependencyFailed``); a ``dependsOn`` cycle of any length fails too (``DependencyCycle``,
the path named). Dependencies gate only the first attempt: once a job has started, what
happens to its dependencies later (deletion, a rerun) does not stop it.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from kuberl_operator import conditions as cond
from kuberl_operator.state import JobState

WAITING_FOR_DEPENDENCY = "WaitingForDependency"


class JobReader(Protocol):
    def get_job(self, namespace: str, name: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class Verdict:
    outcome: Literal["ready", "waiting", "failed"]
    reason: str
    message: str


def judge_dependencies(job: str, dependencies: list[tuple[str, dict[str, Any] | None]]) -> Verdict:
    """What the dependencies' current state means for ``job``: a pure function of their bodies."""
    waiting = []
    for name, body in dependencies:
        if name == job:
            return Verdict("failed", "DependencyCycle", f"the job depends on itself ({name})")
        if body is None:
            waiting.append(f"RLTrainingJob {name} (not found)")
            continue
        names_back = [d.get("name") for d in (body.get("spec") or {}).get("dependsOn") or []]
        if job in names_back:
            message = f"RLTrainingJob {name} depends on this job: a cycle never starts"
            return Verdict("failed", "DependencyCycle", message)
        status = body.get("status") or {}
        phase = status.get("phase") or "Pending"
        if phase == "Failed":
            why = status.get("message") or "no message"
            return Verdict("failed", "DependencyFailed", f"RLTrainingJob {name} failed: {why}")
        if phase != "Succeeded":
            waiting.append(f"RLTrainingJob {name} (phase {phase})")
    if waiting:
        return Verdict("waiting", WAITING_FOR_DEPENDENCY, "waiting for " + ", ".join(waiting))
    names = ", ".join(name for name, _ in dependencies)
    return Verdict("ready", "DependenciesSucceeded", f"{names} succeeded")


DEPENDENCIES_SUCCEEDED = "DependenciesSucceeded"
_SEEN_PREFIX = "seen Succeeded: "
MAX_GRAPH = 64
"""Jobs walked when looking for a dependsOn cycle; a longer chain is not searched further."""


def find_cycle(job: str, first: list[str], lookup: Callable[[str], list[str] | None]) -> list[str]:
    """A dependsOn path from ``job`` back to itself (any length), or []: at most MAX_GRAPH jobs."""
    stack = [[job, name] for name in first]
    visited: set[str] = set()
    while stack:
        path = stack.pop()
        if path[-1] == job:
            return path
        if path[-1] in visited or len(visited) >= MAX_GRAPH:
            continue
        visited.add(path[-1])
        stack.extend([*path, name] for name in lookup(path[-1]) or [])
    return []


def _depends_on(body: dict[str, Any] | None) -> list[str] | None:
    if body is None:
        return None
    return [d.get("name") for d in (body.get("spec") or {}).get("dependsOn") or []]


def _seen_succeeded(state: JobState) -> set[str]:
    """Dependencies this job has seen Succeeded (recorded in its DependenciesSucceeded
    condition): a dependency deleted afterwards (its TTL) still counts as succeeded."""
    recorded = cond.get_condition(state.status, DEPENDENCIES_SUCCEEDED)
    if recorded is None or not recorded.message.startswith(_SEEN_PREFIX):
        return set()
    return {n for n in recorded.message.removeprefix(_SEEN_PREFIX).split(", ") if n}


def _record_succeeded(state: JobState, names: list[str], seen: set[str], bodies: dict) -> None:
    for name, body in bodies.items():
        if body is not None and (body.get("status") or {}).get("phase") == "Succeeded":
            seen.add(name)
    if not seen:
        return
    message = _SEEN_PREFIX + ", ".join(sorted(seen))
    state.condition(DEPENDENCIES_SUCCEEDED, seen >= set(names), "SeenSucceeded", message)


def dependencies_allow_start(kube: JobReader, state: JobState, missing_seconds: float) -> bool:
    """Record the dependencies' verdict in ``state``; True when the first attempt may start."""
    spec = state.spec
    if spec is None or not spec.depends_on or state.status.attempts:
        return True
    namespace = state.ref.namespace
    names = [d.name for d in spec.depends_on]
    bodies = {name: kube.get_job(namespace, name) for name in names}
    seen = _seen_succeeded(state)
    _record_succeeded(state, names, seen, bodies)
    verdict = judge_dependencies(
        state.ref.name, [(n, bodies[n]) for n in names if not (bodies[n] is None and n in seen)]
    )
    if verdict.outcome != "ready" and verdict.reason != "DependencyCycle":
        # a cycle is named as such even when another of its jobs has already failed for it
        cycle = find_cycle(
            state.ref.name,
            names,
            lambda name: _depends_on(
                bodies[name] if name in bodies else kube.get_job(namespace, name)
            ),
        )
        if cycle:
            message = "a dependsOn cycle never starts: " + " -> ".join(cycle)
            verdict = Verdict("failed", "DependencyCycle", message)
        elif verdict.outcome == "waiting" and (
            overdue := _missing_overdue(state, bodies, seen, missing_seconds)
        ):
            verdict = overdue
    if verdict.outcome == "failed":
        state.condition(WAITING_FOR_DEPENDENCY, False, verdict.reason, verdict.message)
        state.finish(False, verdict.reason, verdict.message)
        return False
    if verdict.outcome == "waiting":
        state.set_phase("Pending", verdict.message)
        state.condition(WAITING_FOR_DEPENDENCY, True, verdict.reason, verdict.message)
        return False
    state.condition(WAITING_FOR_DEPENDENCY, False, verdict.reason, verdict.message)
    return True


def _missing_overdue(
    state: JobState, bodies: dict[str, Any], seen: set[str], seconds: float
) -> Verdict | None:
    """A dependency that does not exist (and never succeeded) past the deadline: a verdict."""
    missing = [name for name, body in bodies.items() if body is None and name not in seen]
    waiting = cond.get_condition(state.status, WAITING_FOR_DEPENDENCY)
    since = cond.parse_time(waiting.last_transition_time) if waiting is not None else None
    if not missing or since is None or waiting is None or waiting.status != "True":
        return None
    if seconds <= 0:
        return None
    if (state.now - since).total_seconds() <= seconds:
        return None
    message = (
        f"RLTrainingJob {', '.join(missing)} not found {seconds:.0f}s after this job started "
        "waiting for it: apply it, or remove it from spec.dependsOn"
    )
    return Verdict("failed", "DependencyNotFound", message)
