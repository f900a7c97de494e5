"""``spec.dependsOn``: a job starts only once every job it names has Succeeded.

A GRPO job that warm-starts from an SFT job's export (``model.path`` pointing at that job's
``af_output_dir/huggingface``) names it in ``dependsOn``. Until every named RLTrainingJob (same
namespace) has Succeeded the job stays Pending, with the condition ``WaitingForDependency=True``
whose message names the job it waits for and that job's phase; a missing job is waited for (it
may be applied later). When one of them Failed, the job fails at once (``DependencyFailed``);
a job that names itself, or a job that names it back, is a cycle and fails too. Dependencies
gate only the first attempt: once a job has started, what happens to its dependencies later
(deletion, a rerun) does not stop it.
"""

from dataclasses import dataclass
from typing import Any, Literal, Protocol

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


def dependencies_allow_start(kube: JobReader, state: JobState) -> bool:
    """Record the dependencies' verdict in ``state``; True when the first attempt may start."""
    spec = state.spec
    if spec is None or not spec.depends_on or state.status.attempts:
        return True
    namespace = state.ref.namespace
    bodies = [(d.name, kube.get_job(namespace, d.name)) for d in spec.depends_on]
    verdict = judge_dependencies(state.ref.name, bodies)
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
