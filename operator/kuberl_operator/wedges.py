"""Two things that used to wedge a job for good, kept small and bounded.

- kopf's diff base: by default kopf stores the whole spec in an annotation, and a spec over
  ~256 KiB then fails every patch ("metadata.annotations: Too long"), finalizer removal
  included, so the job stays Terminating with its RayCluster (and GPUs) kept. kuberl's
  handlers reconcile the whole job whatever changed, so a digest of the essence is all kopf
  needs to tell "changed" from "unchanged": one 64-character annotation, whatever the spec.
- A reconcile that raises (an API error, a bug) is reported as a Warning event and the job's
  Synced condition, with a redacted message, and retried with exponential backoff (the timer
  would otherwise retry it every poll and log a traceback each time).
"""

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import kopf

from kuberl_operator.redact import redact

log = logging.getLogger(__name__)


class DigestDiffBaseStorage(kopf.AnnotationsDiffBaseStorage):
    """kopf's annotation diff base, holding a SHA-256 of the essence instead of the essence."""

    def build(
        self, *, body: Any, extra_fields: Iterable[Any] | None = None
    ) -> Any:  # kopf.BodyEssence
        essence = super().build(body=body, extra_fields=extra_fields)
        text = json.dumps(essence, sort_keys=True, separators=(",", ":"), default=str)
        return {"sha256": hashlib.sha256(text.encode()).hexdigest()}


@dataclass
class _Failures:
    count: int
    retry_at: float


class ErrorBackoff:
    """Per job: how many reconciles failed in a row, and when the timer may try again."""

    def __init__(
        self, base: float, cap: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.base, self.cap, self.clock = base, cap, clock
        self._failures: dict[str, _Failures] = {}

    def due(self, key: str) -> bool:
        failures = self._failures.get(key)
        return failures is None or self.clock() >= failures.retry_at

    def failed(self, key: str) -> float:
        """Record a failure; the seconds until the next timer-driven try."""
        count = self._failures[key].count + 1 if key in self._failures else 1
        delay = min(self.cap, self.base * 2 ** (count - 1))
        self._failures[key] = _Failures(count, self.clock() + delay)
        return delay

    def succeeded(self, key: str) -> None:
        self._failures.pop(key, None)


def error_message(err: BaseException, delay: float) -> str:
    text = redact(f"{type(err).__name__}: {err}")
    return f"reconcile failed, retrying in {delay:.0f}s: {text}"[:1000]
