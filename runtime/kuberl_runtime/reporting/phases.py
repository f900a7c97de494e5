"""Heartbeats through the long phases between steps: validation, checkpoint saves, export.

The operator stops a run whose progress stays silent past its deadline (15 minutes at least).
A big model's validation, checkpoint save or final export can take longer than that while
healthy, so while one runs a background thread sends a heartbeat every ``interval`` seconds.
The beats stop after ``limit`` seconds: a phase that hangs (a collective that never returns)
falls silent then, and the operator's hang detection still catches it.
"""

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kuberl_runtime.reporting.k8s import StatusReporter

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 60.0
"""Default seconds between heartbeats; the environment's KUBERL_HEARTBEAT_SECONDS wins."""
LIMIT_SECONDS = 4 * 3600.0


def interval_seconds() -> float:
    return float(os.environ.get("KUBERL_HEARTBEAT_SECONDS") or INTERVAL_SECONDS)


@contextmanager
def beating(
    reporter: object,
    phase: str,
    interval: float | None = None,
    limit: float = LIMIT_SECONDS,
) -> Iterator[None]:
    """Heartbeat ``reporter`` (a StatusReporter; anything else: nothing) while the block runs."""
    if not isinstance(reporter, StatusReporter):
        yield
        return
    interval = interval_seconds() if interval is None else interval
    stop = threading.Event()
    thread = threading.Thread(
        target=_beat, args=(reporter, phase, stop, interval, limit), daemon=True
    )
    thread.name = f"heartbeat-{phase}"
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _beat(
    reporter: StatusReporter, phase: str, stop: threading.Event, interval: float, limit: float
) -> None:
    started = time.monotonic()
    while not stop.wait(interval):
        if time.monotonic() - started > limit:
            log.warning(
                "%s has run %.0fs, past %.0fs: its heartbeats stop, so that a hang is caught",
                phase,
                time.monotonic() - started,
                limit,
            )
            return
        reporter.on_phase(phase)
