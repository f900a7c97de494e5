"""File trackers written on every run: JSONL (one object per step) and TensorBoard."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path


class JsonlTracker:
    """`<logs>/metrics.jsonl`: {"step": N, "<metric>": value, ...} per line, appended on resume."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(path, "a")  # noqa: SIM115 - lives as long as the tracker

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.handle.write(json.dumps({"step": step, **metrics}) + "\n")
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()


class TensorBoardTracker:
    def __init__(self, log_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
