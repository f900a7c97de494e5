"""metav1.Condition bookkeeping on an RLTrainingJobStatus: pure functions, one clock argument.

``lastTransitionTime`` moves only when a condition's status flips; reason and message follow
the latest observation.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from kuberl_api.job import Condition, RLTrainingJobStatus

VALIDATED = "Validated"
CLUSTER_READY = "ClusterReady"
RUNNING = "Running"
RESTARTING = "Restarting"
SUSPENDED = "Suspended"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
CHECKPOINT_AVAILABLE = "CheckpointAvailable"
QUEUED = "Queued"
"""True while Kueue holds the job's RayCluster suspended (not yet admitted, or evicted)."""
ADMITTED = "Admitted"
"""True once Kueue admitted the RayCluster; lastTransitionTime starts preRunningDeadline."""
SYNCED = "Synced"
"""Absent until a reconcile fails: then False (reason ReconcileError, the redacted error and the
next try), and True again (ReconcileSuccess) once a reconcile goes through."""
RECONCILE_ERROR = "ReconcileError"
INITIALIZING = "Initializing"
"""True while the runtime copies remote models and data into the input cache (initializing.py)."""

CONDITION_TYPES = (
    VALIDATED,
    SYNCED,
    QUEUED,
    ADMITTED,
    CLUSTER_READY,
    INITIALIZING,
    RUNNING,
    RESTARTING,
    SUSPENDED,
    SUCCEEDED,
    FAILED,
    CHECKPOINT_AVAILABLE,
)
MAX_MESSAGE = 2000


def isoformat(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Transition:
    """A condition that changed status: what becomes a Kubernetes event."""

    type: str
    status: str
    reason: str
    message: str


def get_condition(status: RLTrainingJobStatus, type_: str) -> Condition | None:
    return next((c for c in status.conditions if c.type == type_), None)


def is_true(status: RLTrainingJobStatus, type_: str) -> bool:
    condition = get_condition(status, type_)
    return condition is not None and condition.status == "True"


def set_condition(
    status: RLTrainingJobStatus,
    type_: str,
    value: bool | None,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None,
) -> Transition | None:
    """Upsert one condition; return the transition when its status changed."""
    text = {True: "True", False: "False", None: "Unknown"}[value]
    message = message[:MAX_MESSAGE]
    current = get_condition(status, type_)
    if current is None:
        status.conditions.append(
            Condition.model_validate(
                {
                    "type": type_,
                    "status": text,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": isoformat(now),
                    "observedGeneration": generation,
                }
            )
        )
        status.conditions.sort(key=lambda c: _order(c.type))
        return Transition(type_, text, reason, message)
    flipped = current.status != text
    current.status = text
    current.reason = reason
    current.message = message
    current.observed_generation = generation
    if flipped:
        current.last_transition_time = isoformat(now)
        return Transition(type_, text, reason, message)
    return None


def _order(type_: str) -> int:
    return CONDITION_TYPES.index(type_) if type_ in CONDITION_TYPES else len(CONDITION_TYPES)
