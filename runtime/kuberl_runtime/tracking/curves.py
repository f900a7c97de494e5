"""`<logs>/curves.png`: the run's learning curves, drawn from `metrics.jsonl` with matplotlib.

One panel per question a person asks of an RL run — is the reward rising, how long are the
responses, how far has the policy moved (KL), is it still exploring (entropy), how fast is it — and
the loss for SFT runs. Panels whose metrics the run never logged are left out. A resumed run appends
to the same JSONL; the last value logged for a step wins.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

# (panel title, metric keys drawn in it, first found wins per key)
PANELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("reward / score", ("critic/score/mean", "critic/rewards/mean")),
    ("validation accuracy", ()),  # every val-core/<source>/<var>/mean@k the run logged
    ("response length", ("response_length/mean",)),
    ("KL", ("actor/ppo_kl", "actor/kl_loss", "critic/kl")),
    ("entropy", ("actor/entropy",)),
    ("throughput (tokens/s/device)", ("perf/throughput",)),
    ("loss", ("train/loss", "val/loss")),
)
VALIDATION_PREFIX = "val-core/"


def read_metrics(path: Path) -> dict[int, dict[str, float]]:
    """step -> metrics, the last record of a step winning (resumed runs re-log steps)."""
    steps: dict[int, dict[str, float]] = {}
    if not path.exists():
        return steps
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash mid-write
        step = int(record.pop("step"))
        steps.setdefault(step, {}).update(record)
    return steps


def series(steps: Mapping[int, Mapping[str, float]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for step in sorted(steps):
        value = steps[step].get(key)
        if value is not None and math.isfinite(value):
            xs.append(step)
            ys.append(value)
    return xs, ys


def _panels(steps: Mapping[int, Mapping[str, float]]) -> list[tuple[str, dict[str, tuple]]]:
    keys = {k for record in steps.values() for k in record}
    val_keys = sorted(k for k in keys if k.startswith(VALIDATION_PREFIX) and "/mean@" in k)
    drawn = []
    for title, wanted in PANELS:
        chosen = val_keys if title == "validation accuracy" else [k for k in wanted if k in keys]
        lines = {key: series(steps, key) for key in chosen}
        lines = {key: xy for key, xy in lines.items() if xy[0]}
        if lines:
            drawn.append((title, lines))
    return drawn


def render_curves(metrics_path: Path, out_path: Path, title: str = "") -> Path | None:
    """Draw `out_path` from `metrics_path`; None when nothing has been logged yet."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never a display
    from matplotlib import pyplot as plt

    panels = _panels(read_metrics(metrics_path))
    if not panels:
        return None
    cols = 2 if len(panels) > 1 else 1
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 3.2 * rows), squeeze=False)
    for ax, (name, lines) in zip(axes.flat, panels, strict=False):
        for key, (xs, ys) in lines.items():
            ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=key)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(out_path)  # a reader never sees half a picture
    return out_path


class CurvesTracker:
    """Redraws the picture at every checkpoint and at the end of the run."""

    def __init__(self, metrics_path: Path, out_path: Path, title: str) -> None:
        self.metrics_path, self.out_path, self.title = metrics_path, out_path, title

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        pass

    def on_checkpoint(self, step: int) -> None:
        render_curves(self.metrics_path, self.out_path, self.title)

    def close(self) -> None:
        render_curves(self.metrics_path, self.out_path, self.title)
