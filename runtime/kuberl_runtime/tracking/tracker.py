"""`Tracker`: fans one metrics dict out to every backend (rank 0 only; others get a no-op)."""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from kuberl_runtime.tracking.console import ConsoleTracker
from kuberl_runtime.tracking.curves import CurvesTracker
from kuberl_runtime.tracking.external import build_external_trackers
from kuberl_runtime.tracking.files import JsonlTracker, TensorBoardTracker
from kuberl_runtime.tracking.prometheus import (
    METRICS_ADDR_ENV,
    METRICS_PORT_ENV,
    PrometheusTracker,
)

CURVES_FILE = "curves.png"
METRICS_FILE = "metrics.jsonl"


class _Backend(Protocol):
    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class _CheckpointListener(Protocol):
    def on_checkpoint(self, step: int) -> None: ...


class Tracker:
    def __init__(
        self, backends: list[_Backend], listeners: list[_CheckpointListener] | None = None
    ) -> None:
        self.backends = backends
        self.listeners = listeners or []

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        numbers = {k: float(v) for k, v in metrics.items() if _is_number(v)}
        for backend in self.backends:
            backend.log(numbers, step)

    def on_checkpoint(self, step: int) -> None:
        for listener in self.listeners:
            listener.on_checkpoint(step)

    def close(self) -> None:
        for backend in self.backends:
            backend.close()


def build_tracker(
    *,
    is_main: bool,
    log_dir: Path,
    loggers: list[str],
    total_steps: int,
    start_step: int,
    project: str,
    experiment: str,
    config: dict[str, Any],
    environ: Mapping[str, str] | None = None,
) -> Tracker:
    if not is_main:
        return Tracker([])
    env = os.environ if environ is None else environ
    jsonl = JsonlTracker(log_dir / METRICS_FILE)
    # The picture is drawn after the JSONL line of the same step is written: keep this order.
    curves = CurvesTracker(log_dir / METRICS_FILE, log_dir / CURVES_FILE, f"{project}/{experiment}")
    # metrics.jsonl is verl's "file" logger and always written: curves.png and `kuberl plot`
    # read it, and a resumed run continues it.
    backends: list[Any] = [jsonl]
    if "console" in loggers:
        backends.insert(0, ConsoleTracker(total_steps, start_step))
    if "tensorboard" in loggers:
        backends.append(TensorBoardTracker(log_dir / "tensorboard"))
    listeners: list[Any] = [curves]
    if port := env.get(METRICS_PORT_ENV):
        job = env.get("KUBERL_JOB_NAME", experiment)
        server = PrometheusTracker(int(port), job, env.get(METRICS_ADDR_ENV, "0.0.0.0"))
        backends.append(server)
        listeners.append(server)
    backends += build_external_trackers(loggers, project, experiment, config, log_dir, env)
    backends.append(curves)
    return Tracker(backends, listeners)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) or (hasattr(value, "item") and value.numel() == 1)
