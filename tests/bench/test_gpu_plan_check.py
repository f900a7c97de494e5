"""bench/gpu_plan_check.py runs its real phases on the CPU (the plumbing; numbers need a GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.runtime

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_plan_check.py"
TINY = {
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "tie_word_embeddings": True,
}


def test_every_phase_is_predicted_and_measured(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    argv = [sys.executable, str(SCRIPT), "--cpu", "--shapes", str(config), "--rows", "2"]
    argv += ["--prompt", "16", "--response", "8", "--repeats", "1", "--out", str(tmp_path)]
    result = subprocess.run(
        argv,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = tmp_path.glob("gpu_plan_check-*.json")
    rows = json.loads(path.read_text())["rows"]
    phases = {r["phase"] for r in rows}
    assert phases == {"init", "update_actor", "old_log_prob", "ref_log_prob", "weight_sync"}
    for row in rows:
        assert row["predicted_gib"] > 0, row
        if row["phase"] not in ("init", "weight_sync"):
            assert row["seconds"] > 0 and row["tflops"] > 0, row
