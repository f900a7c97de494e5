"""bench/gpu_step.py runs end to end in its tiny CPU mode (the GPU numbers need a GPU machine)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_step.py"


def test_help():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and "--dry-run" in result.stdout


def test_dry_run_writes_kuberl_and_trl_figures(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path)],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = tmp_path.glob("gpu_step-dry-run-*.json")
    out = json.loads(path.read_text())
    kuberl = out["kuberl"]
    for key in ("perf/throughput", "generate_s", "old_log_prob_s", "update_s", "weight_sync_s"):
        assert kuberl[key] > 0, key
    assert "peak_memory_allocated_gb" in kuberl and "perf/mfu/actor" in kuberl
    assert out["trl"].get("perf/throughput", 0) > 0, out["trl"]
    assert out["command"]
