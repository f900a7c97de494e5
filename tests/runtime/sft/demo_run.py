"""What the demo tests share: their marks and one run of a demo on its pinned seed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kuberl_runtime.demo_cli import RunDemo

DEMO_MARKS = [pytest.mark.runtime, pytest.mark.long_cpu, pytest.mark.timeout(3600)]
"""A demo is two or three `kuberl train` runs: minutes on the 2 shared cores."""


def run_on_seed_0(run_demo: RunDemo, tmp_path: Path) -> Any:
    """``run_demo`` under ``tmp_path/demo`` on seed 0; prints its report (``pytest -s``)."""
    result = run_demo(tmp_path / "demo", seed=0)
    print(result.report())
    return result
