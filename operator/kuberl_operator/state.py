"""One reconcile's view of a job: the spec as validated, the status being rewritten, the clock.

Everything here mutates only the in-memory status; ``status_patch`` turns the result into the
merge patch the reconciler writes (never touching what the runtime owns: progress, checkpoint).
"""

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.job import Attempt, Phase, RLTrainingJobSpec, RLTrainingJobStatus
from kuberl_api.platform import RunPolicy
from kuberl_operator import conditions as cond
from kuberl_operator.builders import JobRef
from kuberl_operator.status_reader import oversized_metrics, read_status

MAX_ATTEMPTS = 10
RUNTIME_OWNED = ("progress", "checkpoint")
TERMINAL_PHASES = ("Succeeded", "Failed")
INVALID_SPEC = "InvalidSpec"
STATUS_READABLE = "StatusReadable"


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass
class JobState:
    body: dict[str, Any]
    ref: JobRef
    generation: int | None
    now: datetime
    status: RLTrainingJobStatus
    original: dict[str, Any]
    spec: RLTrainingJobSpec | None = None
    effective: BackendConfig | SFTConfig | None = None
    """What the job trains from, effective: its backend_config, or its sft_config."""
    events: list[Event] = field(default_factory=list)
    untouched: set[str] = field(default_factory=set)
    """Status keys this operator does not know (a newer one wrote them): never rewritten."""
    drop_metrics: bool = False
    """``progress.metrics`` is over its cap: the next status write removes it."""

    @classmethod
    def read(cls, body: dict[str, Any], now: datetime) -> "JobState":
        meta = body["metadata"]
        raw = body.get("status") or {}
        oversized = oversized_metrics(raw)
        if oversized is not None:
            raw = {**raw, "progress": {k: v for k, v in raw["progress"].items() if k != "metrics"}}
        status, problems, unknown = read_status(raw)
        problems += [oversized] if oversized is not None else []
        state = cls(
            body=body,
            ref=JobRef(meta["name"], meta["namespace"], meta["uid"]),
            generation=meta.get("generation"),
            now=now,
            status=status,
            original=raw,
            untouched=unknown,
            drop_metrics=oversized is not None,
        )
        state._report_readability(problems)
        return state

    def _report_readability(self, problems: list[str]) -> None:
        if problems:
            message = "; ".join(problems)[:1000]
            self.condition(STATUS_READABLE, False, "StatusNotUnderstood", message)
        elif cond.get_condition(self.status, STATUS_READABLE) is not None:
            self.condition(STATUS_READABLE, True, "StatusUnderstood", "")

    # --- reading ---------------------------------------------------------------------------

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy if self.spec else RunPolicy()

    @property
    def terminal(self) -> bool:
        failed = cond.get_condition(self.status, cond.FAILED)
        invalid_only = failed is not None and failed.reason == INVALID_SPEC
        return self.status.phase in TERMINAL_PHASES and not invalid_only

    def active_attempt(self) -> Attempt | None:
        attempts = self.status.attempts
        if attempts and attempts[-1].result in (None, "Running"):
            return attempts[-1]
        return None

    def previous_attempt(self) -> Attempt | None:
        return self.status.attempts[-2] if len(self.status.attempts) > 1 else None

    def submitted(self, attempt: Attempt) -> bool:
        ray_job = self.status.ray_job
        return ray_job is not None and ray_job.submission_id == attempt.submission_id

    # --- writing ---------------------------------------------------------------------------

    def timestamp(self) -> str:
        return cond.isoformat(self.now)

    def event(self, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(type_, reason, message))

    def condition(self, type_: str, value: bool | None, reason: str, message: str = "") -> None:
        transition = cond.set_condition(
            self.status, type_, value, reason, message, self.now, self.generation
        )
        if transition is not None:
            kind = "Warning" if type_ == cond.FAILED and value else "Normal"
            text = f"{type_}={transition.status}" + (f": {message}" if message else "")
            self.event(kind, reason, text)

    def set_phase(self, phase: Phase, message: str | None = None) -> None:
        self.status.phase = phase
        self.status.message = message

    def add_attempt(self, attempt: Attempt) -> None:
        self.status.attempts.append(attempt)
        del self.status.attempts[:-MAX_ATTEMPTS]

    def finish(self, succeeded: bool, reason: str, message: str) -> None:
        """Enter Succeeded or Failed (pure status change; cleanup follows in the reconciler)."""
        phase: Phase = "Succeeded" if succeeded else "Failed"
        if self.status.phase != phase or not self.status.completion_time:
            self.status.completion_time = self.timestamp()
        self.set_phase(phase, message)
        self.status.next_retry_time = None
        self.condition(cond.SUCCEEDED if succeeded else cond.FAILED, True, reason, message)
        self.condition(cond.RUNNING, False, reason, message)
        if cond.get_condition(self.status, cond.RESTARTING):
            self.condition(cond.RESTARTING, False, reason)

    def status_patch(self) -> dict[str, Any]:
        """Top-level status fields that changed; runtime-owned fields are never written."""
        new = self.status.model_dump(by_alias=True, exclude_none=True, mode="json")
        patch: dict[str, Any] = {}
        for key in new.keys() | self.original.keys():
            if key in RUNTIME_OWNED or key in self.untouched:
                continue
            before, after = self.original.get(key), new.get(key)
            if json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True):
                patch[key] = after
        if self.drop_metrics:
            patch["progress"] = {"metrics": None}  # a merge patch: removes only the metrics
        return patch
