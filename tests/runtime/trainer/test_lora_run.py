"""A LoRA run end to end: reference = adapters off, checkpoint, merged export at the end and
on demand agree bitwise."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.runtime.trainer.conftest import (
    base_config,
    read_metrics,
    read_weights,
    run_train,
    set_key,
)

pytestmark = pytest.mark.runtime


def test_lora_training_checkpoints_and_exports(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    config = base_config(tiny_model_dir, out, total_training_steps=2, save_freq=2)
    set_key(config, "actor_rollout_ref.model.lora_rank", 8)
    set_key(config, "actor_rollout_ref.model.lora_alpha", 16)
    set_key(config, "actor_rollout_ref.actor.optim.lr", 1e-2)
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = read_metrics(out)
    assert metrics[2]["actor/kl_loss"] > 0  # the adapters moved the policy away from the base

    merged = read_weights(out / "huggingface")
    assert not any("lora" in name for name in merged)
    base = read_weights(tiny_model_dir)
    assert any(not torch.equal(merged[name], base[name]) for name in base)

    target = tmp_path / "exported"
    cli = [sys.executable, "-m", "kuberl_cli.main", "export", str(out / "global_step_2")]
    done = subprocess.run([*cli, "-o", str(target)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    exported = read_weights(target)
    for name, tensor in merged.items():
        assert torch.equal(exported[name], tensor), name
