"""examples/roll-rlvr-fsdp2.yaml — a ROLL FSDP2 RLVR config with ROLL's reward/advantage options —
validates and trains two steps on CPU with `kuberl train` (tiny random-init model, arith data)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from safetensors.torch import load_file

from tests.runtime.trainer.conftest import REPO, read_metrics, run_train

pytestmark = pytest.mark.runtime

EXAMPLE = REPO / "examples" / "roll-rlvr-fsdp2.yaml"


def roll_example(model_dir: Path, out_dir: Path, **changes: Any) -> dict[str, Any]:
    config = yaml.safe_load(EXAMPLE.read_text())
    config.update(pretrain=str(model_dir), output_dir=str(out_dir), max_steps=2, eval_steps=100)
    for worker in ("actor_train",):
        data = config[worker]["data_args"]
        data["file_name"] = str(REPO / data["file_name"])
    config["validation"]["data_args"]["file_name"] = str(
        REPO / config["validation"]["data_args"]["file_name"]
    )
    config.update(changes)
    return config


def validate(config: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "validate.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "kuberl_cli.main", "validate", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_example_validates_with_every_option_mapped(tmp_path, tiny_model_dir):
    done = validate(roll_example(tiny_model_dir, tmp_path / "out"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ok (roll) — reinforce_plus_plus" in done.stderr + done.stdout
    assert "not supported" not in done.stderr


def test_options_shape_the_update_over_two_steps(tmp_path, tiny_model_dir):
    # Every response kept (no length mask, a band that keeps unsolved prompts): the clips and
    # the group-mean normalisation run and the actor is updated.
    out = tmp_path / "out"
    config = roll_example(tiny_model_dir, out, max_len_mask=False, difficulty_low_threshold=-1.0)
    done = run_train(config, tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = read_metrics(out)
    assert {1, 2} <= set(metrics)  # step 0: validation before training
    for step in (1, 2):
        assert metrics[step]["actor/samples_used"] == metrics[step]["actor/samples_total"] == 32
        assert metrics[step]["mask/final_mask_sum_eq_0"] == 0.0
        assert "critic/advantage_clip_frac" in metrics[step]
        assert "critic/reward_clip_frac" in metrics[step]
        assert "actor/pg_loss" in metrics[step]


def test_a_step_with_every_response_masked_makes_no_update(tmp_path, tiny_model_dir):
    # The example as written: a random model solves nothing, so difficulty_mask (mean score must
    # exceed 0.1) leaves every response out and, as in ROLL, both steps make no update.
    out = tmp_path / "out"
    done = run_train(roll_example(tiny_model_dir, out), tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = read_metrics(out)
    for step in (1, 2):
        assert metrics[step]["actor/difficulty_mask_ratio"] == 0.0
        assert metrics[step]["mask/final_mask_sum_eq_0"] == 1.0
        assert "actor/pg_loss" not in metrics[step]
    trained = load_file(out / "huggingface" / "model.safetensors")
    initial = load_file(tiny_model_dir / "model.safetensors")
    assert sorted(trained) == sorted(initial)
    for name, tensor in initial.items():
        assert torch.equal(trained[name], tensor.to(trained[name].dtype)), name
