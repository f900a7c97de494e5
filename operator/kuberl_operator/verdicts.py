"""Validation verdicts remembered per job, by a digest of exactly what validation reads.

A timer tick re-reads a job whose spec rarely changed; validating it again was ~70% of an
unchanged reconcile's CPU. The verdict is a function of three inputs and nothing else:

- the manifest validation is given (apiVersion, kind, the job's name and namespace, its spec);
- the operator settings the policy reads (``spec_policy.PolicySettings``, frozen at start);
- the validation code itself, named by the kuberl release and its plan version.

Validation reads no file, environment variable or clock in the operator: ``${oc.env:...}`` is
refused there (``allow_env`` off) and the model rules' local config.json reads are off
(``read_models`` off). So one job's entry holds the digest of those inputs and the verdict; a
changed spec (or a changed setting, release) has another digest and is validated again. One
entry per job, the least recently used dropped past ``capacity``, a deleted job's dropped at once.
"""

import hashlib
import importlib.metadata
import json
import threading
from collections import OrderedDict
from typing import Any, Generic, TypeVar

from kuberl_api.plan.version import PLAN_VERSION

MAX_JOBS = 2048
"""Jobs whose verdict is remembered; past this the least recently validated is forgotten (it
is then validated again on its next reconcile, nothing else). A verdict holds the parsed spec and
the effective config: ~70 KiB for tests/support/manifests.py's job (tracemalloc), so ~140 MiB
at most."""

V = TypeVar("V")


def code_version() -> str:
    """The validation code: the installed kuberl release and the plan schema it writes."""
    try:
        release = importlib.metadata.version("kuberl")
    except importlib.metadata.PackageNotFoundError:
        release = "unknown"
    return f"kuberl {release} plan {PLAN_VERSION}"


def inputs_digest(manifest: dict[str, Any], settings: str) -> str:
    """SHA-256 of everything validation reads: the code, the settings, the manifest."""
    text = json.dumps([settings, manifest], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def job_key(manifest: dict[str, Any]) -> str:
    meta = manifest.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


class VerdictCache(Generic[V]):
    """job -> (inputs digest, verdict); thread-safe, bounded, least recently used first out."""

    def __init__(self, capacity: int = MAX_JOBS) -> None:
        if capacity < 1:
            raise ValueError(f"VerdictCache capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[str, V]] = OrderedDict()

    def get(self, job: str, digest: str) -> V | None:
        """The job's verdict when it was reached on these very inputs, else None."""
        with self._lock:
            entry = self._entries.get(job)
            if entry is None or entry[0] != digest:
                return None
            self._entries.move_to_end(job)
            return entry[1]

    def put(self, job: str, digest: str, verdict: V) -> None:
        with self._lock:
            self._entries[job] = (digest, verdict)
            self._entries.move_to_end(job)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def forget(self, job: str) -> None:
        with self._lock:
            self._entries.pop(job, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)
