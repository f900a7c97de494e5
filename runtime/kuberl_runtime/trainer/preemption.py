"""Stopping on request with a checkpoint: Kueue preemption, node drain, `suspend`.

Kubernetes (and `ray job stop`, and the local launcher, which forwards it to its ranks) asks a
process to stop with SIGTERM and kills it when the grace period ends. A rank that gets SIGTERM
finishes the step in flight, then every rank (they agree through an all-reduce, since the signal
reaches them at different instants) saves a checkpoint at that step unless the step just saved
one, announces it, and the run ends with `Preempted` (exit code 143, as a process killed by
SIGTERM). The next attempt resumes from that step: only the step in flight when the signal came
is at risk, and only when it cannot finish within the grace period.

Under the Ray launcher the signal reaches the driver (`ray job stop`: the operator's suspend and
Kueue eviction), not the ranks' actors: the driver names a stop file on the (shared) output
directory in KUBERL_STOP_FILE (forwarded to every rank), creates it on SIGTERM, and each rank
looks for it after every step.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import uuid
from pathlib import Path

from kuberl_runtime.distributed import all_reduce_max

logger = logging.getLogger(__name__)

EXIT_CODE = 128 + signal.SIGTERM
STOP_FILE_PREFIX = ".kuberl-stop-"
STOP_FILE_ENV = "KUBERL_STOP_FILE"


class Preempted(Exception):
    """The run stopped on request after saving a checkpoint at `step`."""

    def __init__(self, step: int) -> None:
        super().__init__(f"stopped on request after saving a checkpoint at step {step}")
        self.step = step


class StopRequest:
    """Set by SIGTERM (main thread) or by the driver's stop file; read once per step."""

    def __init__(self, stop_file: Path | None = None) -> None:
        self._event = threading.Event()
        self.stop_file = stop_file

    def install(self) -> None:
        """Route SIGTERM here; a no-op off the main thread (Python only signals it)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, _frame: object) -> None:
        logger.warning("signal %d: saving a checkpoint after the step in flight", signum)
        self._event.set()

    def requested_here(self) -> bool:
        if self.stop_file is not None and self.stop_file.exists():
            self._event.set()
        return self._event.is_set()

    def agreed(self) -> bool:
        """True on every rank when any rank was asked to stop (a collective: all ranks call it
        after the same step)."""
        return bool(all_reduce_max(int(self.requested_here())))


def stop_file_from_env() -> Path | None:
    """The stop file the Ray driver named for this run (none under the local launcher)."""
    named = os.environ.get(STOP_FILE_ENV)
    return Path(named) if named else None


def new_stop_file(output_dir: str | Path) -> Path:
    """A stop file only this run uses (an old one left behind stops nothing)."""
    run = os.environ.get("KUBERL_SUBMISSION_ID") or uuid.uuid4().hex[:12]
    return Path(output_dir) / f"{STOP_FILE_PREFIX}{run}"
