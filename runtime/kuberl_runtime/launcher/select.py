"""Which launcher starts the ranks: `--launcher`, else KUBERL_LAUNCHER, else inside a Ray cluster
(RAY_ADDRESS set, as it is for a Ray job's entrypoint) the Ray launcher, else local processes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from kuberl_runtime.config import RunConfig
from kuberl_runtime.launcher.local import LaunchError

LauncherName = Literal["local", "ray"]
LAUNCHER_CHOICES = ("auto", "local", "ray")
LAUNCHER_ENV = "KUBERL_LAUNCHER"


def choose_launcher(requested: str | None, environ: Mapping[str, str]) -> LauncherName:
    choice = requested or environ.get(LAUNCHER_ENV) or "auto"
    if choice not in LAUNCHER_CHOICES:
        raise LaunchError(f"launcher {choice!r}: expected one of {', '.join(LAUNCHER_CHOICES)}")
    if choice == "auto":
        return "ray" if environ.get("RAY_ADDRESS") else "local"
    return choice  # type: ignore[return-value]


def launch(run: RunConfig, requested: str | None = None) -> int:
    """Run the job with the chosen launcher; returns the exit code."""
    if choose_launcher(requested, os.environ) == "ray":
        from kuberl_runtime.launcher.ray import launch_ray

        return launch_ray(run)
    from kuberl_runtime.launcher.local import launch_local

    return launch_local(run)
