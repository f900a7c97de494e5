"""`Tracker`: fans one metrics dict out to every backend (rank 0 only; others get a no-op)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from kuberl_runtime.tracking.console import ConsoleTracker
from kuberl_runtime.tracking.external import build_external_trackers
from kuberl_runtime.tracking.files import JsonlTracker, TensorBoardTracker


class _Backend(Protocol):
    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class Tracker:
    def __init__(self, backends: list[_Backend]) -> None:
        self.backends = backends

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        numbers = {k: float(v) for k, v in metrics.items() if _is_number(v)}
        for backend in self.backends:
            backend.log(numbers, step)

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
) -> Tracker:
    if not is_main:
        return Tracker([])
    backends: list[_Backend] = [
        ConsoleTracker(total_steps, start_step),
        JsonlTracker(log_dir / "metrics.jsonl"),
        TensorBoardTracker(log_dir / "tensorboard"),
    ]
    backends += build_external_trackers(loggers, project, experiment, config)
    return Tracker(backends)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) or (hasattr(value, "item") and value.numel() == 1)
