"""`ProgressReporter`: the trainer's progress as the control plane wants it (step, checkpoint).

The trainer calls it on rank 0 only. Locally it does nothing; the operator issue adds one that
patches the RLTrainingJob status subresource, selected in `progress_reporter_from_env`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class ProgressReporter(Protocol):
    def on_start(self, *, start_step: int, total_steps: int) -> None: ...

    def on_step(self, *, step: int, total_steps: int, metrics: Mapping[str, float]) -> None: ...

    def on_checkpoint(self, *, step: int, path: str) -> None: ...

    def on_finish(self, *, step: int, exported_model: str | None) -> None: ...


class NullProgressReporter:
    """The local reporter: progress is already on the console and in the metric files."""

    def on_start(self, *, start_step: int, total_steps: int) -> None:
        pass

    def on_step(self, *, step: int, total_steps: int, metrics: Mapping[str, float]) -> None:
        pass

    def on_checkpoint(self, *, step: int, path: str) -> None:
        pass

    def on_finish(self, *, step: int, exported_model: str | None) -> None:
        pass


def progress_reporter_from_env() -> ProgressReporter:
    """The job-status reporter when running for an RLTrainingJob in a cluster, else a no-op."""
    from kuberl_runtime.reporting import status_reporter_from_env

    return status_reporter_from_env() or NullProgressReporter()
