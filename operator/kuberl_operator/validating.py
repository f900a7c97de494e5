"""Spec validation with a deadline, off kopf's worker threads.

Validation resolves a job author's ``${...}`` interpolations and walks free-form trees: work
whose size the author chooses. The interpolation budget (kuberl_api.validation
.interpolation_budget) and the shape bounds (bounds.py) refuse the known runaways up front;
this is the backstop for the rest. Each validation runs on this module's own small pool and the
reconcile waits at most ``timeout`` seconds. A spec over the deadline is refused naming the
deadline, and stays refused without being validated again (remembered by digest); a changed
spec is a new validation. A verdict reached is remembered per job by the digest of exactly what
validation reads (``verdicts.py``): an unchanged spec's reconcile does not validate again. A
thread cannot be stopped: the overdue one runs to its end. A validation that could not even
start (every worker busy) is no verdict: ``ValidationBusy`` fails the reconcile, which is retried
with backoff.
"""

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from kuberl_api.validation import Problem, SpecInvalid, parse_document, validate_document
from kuberl_operator.accepted import Accepted
from kuberl_operator.bounds import shape_problems
from kuberl_operator.verdicts import VerdictCache, code_version, inputs_digest, job_key

log = logging.getLogger(__name__)

MAX_REMEMBERED = 256
"""Specs remembered (by digest) as over the deadline; the oldest is forgotten first."""


@dataclass(frozen=True)
class Verdict:
    problems: list[Problem]
    """Errors only; empty when the spec is valid."""
    spec: Any = None
    effective: Any = None
    accepted: Accepted = field(default_factory=Accepted)


Policy = Callable[[Any], list[Problem]]


class ValidationBusy(RuntimeError):
    """The validation never started (every worker busy): a reconcile error, retried with
    backoff, not a verdict on the spec."""


def validate_manifest(manifest: dict[str, Any], policy: Policy) -> Verdict:
    """The whole verdict on one manifest: shape bounds, then kuberl_api's rules, then policy."""
    bounded = shape_problems(manifest.get("spec"))
    if bounded:
        return Verdict(bounded)
    try:
        document = parse_document(manifest, source=manifest["metadata"]["name"])
        result = validate_document(document, read_models=False)  # reads the document alone
    except SpecInvalid as err:
        return Verdict(err.problems)
    problems, spec = result.problems, result.spec
    if spec is not None:  # what the admin allows job authors (hostPath, Secrets, env names)
        problems = [*problems, *policy(spec)]
    accepted = Accepted(
        [p for p in problems if not p.is_error], result.not_honoured, result.at_verl_default
    )
    errors = [p for p in problems if p.is_error]
    if errors:
        return Verdict(errors)
    return Verdict([], spec, result.effective_config, accepted)


class DeadlineValidator:
    def __init__(
        self,
        policy: Policy,
        timeout: float,
        workers: int = 4,
        settings: str = "",
        verdicts: VerdictCache[Verdict] | None = None,
    ) -> None:
        """``settings`` names every operator setting ``policy`` reads (its verdicts are
        remembered under it); ``verdicts`` the per-job memory of verdicts reached."""
        self.policy = policy
        self.timeout = timeout
        self.inputs = f"{code_version()} {settings}"
        self.verdicts: VerdictCache[Verdict] = VerdictCache() if verdicts is None else verdicts
        self.runs = 0
        """Validations started (remembered verdicts are not counted)."""
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="validate")
        self._lock = threading.Lock()
        self._overdue: OrderedDict[str, Future[Verdict]] = OrderedDict()

    def validate(self, manifest: dict[str, Any]) -> Verdict:
        digest = inputs_digest(manifest, self.inputs)
        job = job_key(manifest)
        known = self.verdicts.get(job, digest)
        if known is not None:
            return known
        with self._lock:
            earlier = self._overdue.get(digest)
        if earlier is not None:
            return self._over_deadline(still_running=not earlier.done())
        future = self._pool.submit(validate_manifest, manifest, self.policy)
        with self._lock:
            self.runs += 1
        try:
            verdict = future.result(timeout=self.timeout)
        except FutureTimeout:
            name = manifest["metadata"]["name"]
            if future.cancel():  # never started: the pool is busy, not this spec's fault
                raise ValidationBusy(
                    f"validating {name} did not start within {self.timeout:.0f}s: every "
                    "validation worker is busy; retried with backoff"
                ) from None
            log.warning("validating %s took over %.0fs; refused", name, self.timeout)
            self._remember(digest, future)
            return self._over_deadline(still_running=False)
        self.verdicts.put(job, digest, verdict)
        return verdict

    def forget(self, namespace: str, name: str) -> None:
        """The job is gone: drop its remembered verdict."""
        self.verdicts.forget(f"{namespace}/{name}")

    def _remember(self, digest: str, future: "Future[Verdict]") -> None:
        with self._lock:
            self._overdue[digest] = future
            while len(self._overdue) > MAX_REMEMBERED:
                self._overdue.popitem(last=False)

    def _over_deadline(self, still_running: bool) -> Verdict:
        more = "; it is still running" if still_running else ""
        return Verdict(
            [
                Problem(
                    "spec",
                    f"validation took longer than the operator's {self.timeout:.0f}s deadline"
                    f" (--validation-timeout){more}",
                    "shrink the backend_config: fewer ${...} interpolations, less nesting",
                )
            ]
        )

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
