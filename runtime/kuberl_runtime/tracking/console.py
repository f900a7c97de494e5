"""The console: one verl-style line per step and a progress bar with ETA (rank 0 only).

This is the one place in the runtime that writes to the terminal directly.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import TextIO

_HEADLINE = (
    "critic/score/mean",
    "actor/pg_loss",
    "critic/vf_loss",
    "actor/entropy",
    "response_length/mean",
    "timing_s/step",
    "perf/throughput",
    "train/loss",
    "val/loss",
)


class ConsoleTracker:
    def __init__(self, total_steps: int, start_step: int = 0, stream: TextIO | None = None):
        self.total_steps = total_steps
        self.start_step = start_step
        self.started = time.monotonic()
        self.stream = stream or sys.stdout

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        keys = [k for k in _HEADLINE if k in metrics]
        keys += [k for k in metrics if k.startswith("val-core/")]
        line = " - ".join([f"step:{step}"] + [f"{k}:{_fmt(metrics[k])}" for k in keys])
        self.stream.write(line + "\n")
        if step > 0:
            self.stream.write(self._progress_bar(step) + "\n")
        self.stream.flush()

    def _progress_bar(self, step: int) -> str:
        done = max(0, step - self.start_step)
        elapsed = time.monotonic() - self.started
        remaining = self.total_steps - step
        eta = elapsed / done * remaining if done else 0.0
        width = 30
        filled = int(width * step / max(1, self.total_steps))
        bar = "#" * filled + "." * (width - filled)
        return f"[{bar}] {step}/{self.total_steps} elapsed {_clock(elapsed)} eta {_clock(eta)}"

    def close(self) -> None:
        pass


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}"
