"""wandb / mlflow / swanlab, each used when selected in `trainer.logger`.

A selected one that this environment cannot import is refused before the run starts
(`missing_trackers`, checked where the runtime validates its job: `kuberl_runtime.config`).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)

EXTERNAL_TRACKERS = ("wandb", "mlflow", "swanlab")


class _RunLogger:
    def __init__(self, name: str, project: str, experiment: str, config: dict[str, Any]) -> None:
        self.name = name
        self.module = importlib.import_module(name)
        if name == "mlflow":
            self.module.set_experiment(project)
            self.module.start_run(run_name=experiment)
            self.module.log_params({"config": str(config)[:5000]})
        else:
            self.module.init(project=project, name=experiment, config=config)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        if self.name == "mlflow":
            safe = {k.replace("@", "_at_"): v for k, v in metrics.items()}
            self.module.log_metrics(safe, step=step)
        else:
            self.module.log(dict(metrics), step=step)

    def close(self) -> None:
        finish = "end_run" if self.name == "mlflow" else "finish"
        getattr(self.module, finish)()


INSTALL_HINTS = {
    "wandb": "pip install wandb (and set WANDB_API_KEY)",
    "mlflow": "pip install mlflow (and set MLFLOW_TRACKING_URI)",
    "swanlab": "pip install swanlab (and set SWANLAB_API_KEY)",
}


def missing_trackers(selected: list[str]) -> list[str]:
    """The selected external trackers this Python environment cannot import."""
    return [
        name
        for name in EXTERNAL_TRACKERS
        if name in selected and importlib.util.find_spec(name) is None
    ]


def build_external_trackers(
    selected: list[str], project: str, experiment: str, config: dict[str, Any]
) -> list[_RunLogger]:
    trackers = []
    for name in EXTERNAL_TRACKERS:
        if name not in selected:
            continue
        trackers.append(_RunLogger(name, project, experiment, config))
    return trackers
