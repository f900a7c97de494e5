"""wandb / mlflow / swanlab, each used when selected in `trainer.logger`.

verl passes the job's project, experiment and config to each and leaves the connection to the
tracker's own environment variables; kuberl does the same, and where a tracker has no server to
talk to it records the run offline under the job's log directory instead of failing after the
GPUs are up (a cluster without internet or without an API key is the common case):

- wandb: ``WANDB_MODE`` is honoured as set; unset and without ``WANDB_API_KEY``, the run is
  offline under ``<logs>/wandb`` (``wandb sync <logs>/wandb/offline-run-*`` uploads it later).
- mlflow: ``MLFLOW_TRACKING_URI`` is honoured as set; unset, mlflow's own default store, a
  SQLite file, at ``<logs>/mlflow.db`` (``mlflow ui --backend-store-uri sqlite:///<logs>/mlflow.db``).
- swanlab: ``SWANLAB_MODE`` is honoured as set; unset and without ``SWANLAB_API_KEY``, offline
  under ``<logs>/swanlog`` (``swanlab sync`` uploads it later).

A selected one that this environment cannot import is refused before the run starts
(`missing_trackers`, checked where the runtime validates its job: `kuberl_runtime.config`).
The kuberl images install all three (the ``trackers`` extra).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kuberl_runtime.installed import installed

logger = logging.getLogger(__name__)

EXTERNAL_TRACKERS = ("wandb", "mlflow", "swanlab")

INSTALL_HINTS = {
    "wandb": "pip install wandb (and set WANDB_API_KEY, or WANDB_MODE=offline)",
    "mlflow": "pip install mlflow (and set MLFLOW_TRACKING_URI)",
    "swanlab": "pip install swanlab (and set SWANLAB_API_KEY, or SWANLAB_MODE=offline)",
}


class _RunLogger:
    """One external tracker's run: started on construction, closed by `close`."""

    def __init__(
        self,
        name: str,
        project: str,
        experiment: str,
        config: dict[str, Any],
        log_dir: Path,
        env: Mapping[str, str],
    ) -> None:
        self.name = name
        self.module = importlib.import_module(name)
        if name == "mlflow":
            self._start_mlflow(project, experiment, config, log_dir, env)
        elif name == "wandb":
            mode = _mode(env, "WANDB_MODE", "WANDB_API_KEY")
            log_dir.mkdir(parents=True, exist_ok=True)
            _say_where(name, mode, log_dir / "wandb")
            self.module.init(
                project=project, name=experiment, config=config, dir=str(log_dir), mode=mode
            )
        else:
            mode = _mode(env, "SWANLAB_MODE", "SWANLAB_API_KEY")
            _say_where(name, mode, log_dir / "swanlog")
            self.module.init(
                project=project,
                name=experiment,
                config=config,
                log_dir=str(log_dir / "swanlog"),
                mode=mode,
            )

    def _start_mlflow(
        self,
        project: str,
        experiment: str,
        config: dict[str, Any],
        log_dir: Path,
        env: Mapping[str, str],
    ) -> None:
        uri = env.get("MLFLOW_TRACKING_URI")
        if not uri:
            store = log_dir.resolve() / "mlflow.db"
            log_dir.mkdir(parents=True, exist_ok=True)
            logger.info("mlflow: no MLFLOW_TRACKING_URI; recording to %s", store)
            uri = f"sqlite:///{store}"
        self.module.set_tracking_uri(uri)
        self.module.set_experiment(project)
        self.module.start_run(run_name=experiment)
        self.module.log_params({"config": str(config)[:5000]})

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        if self.name == "mlflow":
            safe = {k.replace("@", "_at_"): v for k, v in metrics.items()}
            self.module.log_metrics(safe, step=step)
        else:
            self.module.log(dict(metrics), step=step)

    def close(self) -> None:
        finish = "end_run" if self.name == "mlflow" else "finish"
        getattr(self.module, finish)()


def _mode(env: Mapping[str, str], mode_var: str, key_var: str) -> str:
    """The mode the user set; else online with an API key, offline without one."""
    if env.get(mode_var):
        return env[mode_var]
    return "online" if env.get(key_var) else "offline"


def _say_where(name: str, mode: str, where: Path) -> None:
    if mode == "offline":
        logger.info("%s: no API key; recording offline under %s (sync it later)", name, where)


def missing_trackers(selected: list[str]) -> list[str]:
    """The selected external trackers this Python environment cannot import."""
    return [name for name in EXTERNAL_TRACKERS if name in selected and not installed(name)]


def build_external_trackers(
    selected: list[str],
    project: str,
    experiment: str,
    config: dict[str, Any],
    log_dir: Path,
    env: Mapping[str, str],
) -> list[_RunLogger]:
    return [
        _RunLogger(name, project, experiment, config, log_dir, env)
        for name in EXTERNAL_TRACKERS
        if name in selected
    ]
