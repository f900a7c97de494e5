"""Tiny SFT runs: arithmetic conversations, a random-init tiny Qwen2, `kuberl train` on CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.runtime.trainer.conftest import TOKENIZER_DIR, run_train, set_key


@pytest.fixture(scope="session")
def sft_model_dir(tmp_path_factory) -> Path:
    from transformers import AutoTokenizer

    from kuberl_runtime.testing.tiny import save_tiny_model

    out = tmp_path_factory.mktemp("sft-models") / "tiny-qwen2"
    save_tiny_model(out, AutoTokenizer.from_pretrained(TOKENIZER_DIR), seed=0)
    return out


@pytest.fixture(scope="session")
def sft_data_dir(tmp_path_factory) -> Path:
    from kuberl_runtime.testing.arith_sft import write_arith_sft_dataset

    out = tmp_path_factory.mktemp("sft-data")
    write_arith_sft_dataset(out, train_size=64, test_size=16)
    return out


def sft_config(model_dir: Path, data_dir: Path, out_dir: Path, **trainer: Any) -> dict[str, Any]:
    """verl 0.9.1's SFT keys, sized for a second a step on one CPU core."""
    return {
        "data": {
            "train_files": str(data_dir / "train.parquet"),
            "val_files": str(data_dir / "test.parquet"),
            "train_batch_size": 8,
            "micro_batch_size_per_gpu": 2,
            "use_dynamic_bsz": False,
            "max_length": 256,
        },
        "model": {
            "path": str(model_dir),
            "enable_gradient_checkpointing": False,
            "use_remove_padding": True,
        },
        "optim": {"lr": 1e-3, "lr_warmup_steps_ratio": 0.1, "lr_scheduler_type": "cosine"},
        "trainer": {
            "device": "cpu",
            "nnodes": 1,
            "n_gpus_per_node": 1,
            "total_training_steps": 6,
            "logger": ["console"],
            "default_local_dir": str(out_dir),
            **trainer,
        },
    }


def two_rank_sft_config(model_dir: Path, data_dir: Path, out_dir: Path) -> dict[str, Any]:
    """Two ranks, 6 steps, the validation loss at steps 3 and 6, a checkpoint every 2 steps (the
    2 newest kept)."""
    config = sft_config(model_dir, data_dir, out_dir, n_gpus_per_node=2, save_freq=2, test_freq=3)
    set_key(config, "trainer.max_ckpt_to_keep", 2)
    return config


@pytest.fixture(scope="session")
def two_rank_sft_run(sft_model_dir, sft_data_dir, tmp_path_factory) -> tuple[Path, str]:
    """One uninterrupted `two_rank_sft_config` run (its output directory and log), read by
    test_sft_train (two ranks like one; the resume's reference) and test_sft_sp (the dp 2 side):
    tests never write into it."""
    tmp = tmp_path_factory.mktemp("sft-two-ranks")
    result = run_train(two_rank_sft_config(sft_model_dir, sft_data_dir, tmp / "out"), tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "out", result.stderr
