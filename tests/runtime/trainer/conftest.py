"""Run `kuberl train` on tiny configs in a process of its own and read back what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.warm_python import BASE_ENV, warm_python

REPO = Path(__file__).resolve().parents[3]
TOKENIZER_DIR = REPO / "examples" / "tokenizer" / "arith-tokenizer"
DATA_DIR = REPO / "examples" / "data" / "arith"
DIGIT_REWARD = Path(__file__).resolve().parent / "digit_reward.py"


def base_config(model_dir: Path, out_dir: Path, **trainer: Any) -> dict[str, Any]:
    """GRPO with a KL loss on the arithmetic prompts, small enough for a few seconds a step."""
    return {
        "data": {
            "train_files": str(DATA_DIR / "train.parquet"),
            "train_batch_size": 4,
            "max_prompt_length": 80,
            "max_response_length": 12,
            "truncation": "left",
        },
        "actor_rollout_ref": {
            "model": {
                "path": str(model_dir),
                "use_remove_padding": True,
                "enable_gradient_checkpointing": False,
            },
            "actor": {
                "optim": {"lr": 1e-3},
                "ppo_mini_batch_size": 2,
                "ppo_micro_batch_size_per_gpu": 2,
                "use_kl_loss": True,
            },
            "ref": {"log_prob_micro_batch_size_per_gpu": 8},
            "rollout": {
                "name": "hf",
                "n": 2,
                "log_prob_micro_batch_size_per_gpu": 8,
                "tensor_model_parallel_size": 1,
            },
        },
        "algorithm": {"adv_estimator": "grpo"},
        "custom_reward_function": {"path": str(DIGIT_REWARD)},
        "trainer": {
            "device": "cpu",
            "nnodes": 1,
            "n_gpus_per_node": 1,
            "total_training_steps": 3,
            "val_before_train": False,
            "default_local_dir": str(out_dir),
            "logger": ["console"],
            **trainer,
        },
    }


def set_key(config: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = config
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value


def run_train(
    config: dict[str, Any], tmp_path: Path, env: dict[str, str] | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    """`python -m kuberl_cli.main train CONFIG`, forked from a warm interpreter (warm_python.py)."""
    path = tmp_path / f"config-{len(list(tmp_path.glob('config-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = ["-m", "kuberl_cli.main", "train", str(path)]
    return warm_python().run(argv, {**os.environ, **BASE_ENV, **(env or {})}, timeout)


def read_metrics(out_dir: Path) -> dict[int, dict[str, float]]:
    """The last logged metrics of each step (a resumed run logs the steps it redoes again)."""
    steps: dict[int, dict[str, float]] = {}
    for line in (out_dir / "logs" / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        steps[record.pop("step")] = record
    return steps


def deterministic(metrics: dict[str, float]) -> dict[str, float]:
    """Everything except wall-clock measurements."""
    return {
        k: v
        for k, v in metrics.items()
        if not k.startswith(("timing_s/", "timing_per_token_ms/", "perf/"))
    }


def read_weights(model_dir: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def assert_same_training(reference: Path, other: Path, steps: list[int]) -> None:
    """Two runs' outputs trained alike: the same steps, every deterministic metric within
    rel 1e-4 (abs 1e-6), and exported weights within atol 1e-5 (rtol 1e-4)."""
    import torch

    ref, oth = read_metrics(reference), read_metrics(other)
    assert sorted(ref) == sorted(oth) == steps
    for step in ref:
        a, b = deterministic(ref[step]), deterministic(oth[step])
        assert a.keys() == b.keys()
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), (step, key)
    w1, w2 = read_weights(reference / "huggingface"), read_weights(other / "huggingface")
    assert w1.keys() == w2.keys()
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], atol=1e-5, rtol=1e-4)
