"""Training runs that tests in more than one directory compare against: each runs once a session.

A fixture here returns a finished run's output directory and log; tests only read them (a test
that must continue or change a run copies it first with shutil.copytree). Each test that
compares its own run against a shared one builds it from `tiny_model_dir` and the config
function the shared run was built from, changing only the key it tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.trainer.conftest import TOKENIZER_DIR, base_config, run_train, set_key


@dataclass(frozen=True)
class SharedRun:
    """A finished `kuberl train` run: its output directory and its log (stderr)."""

    out: Path
    log: str


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny Qwen2 (seed 0) of the runtime tests' training runs, built once a session (a
    fixture imported into another conftest or module would be a second one, built again)."""
    from transformers import AutoTokenizer

    from kuberl_runtime.testing.tiny import save_tiny_model

    out = tmp_path_factory.mktemp("models") / "tiny-qwen2"
    save_tiny_model(out, AutoTokenizer.from_pretrained(TOKENIZER_DIR), seed=0)
    return out


def two_rank_config(model_dir: Path, out: Path) -> dict[str, Any]:
    """GRPO, 2 gloo ranks, 2 steps; two micro-batches a mini-batch on one rank (accumulation);
    balance_batch off (verl's regroups rows per DP rank: mini-batches would depend on dp)."""
    config = base_config(model_dir, out, total_training_steps=2, n_gpus_per_node=2)
    set_key(config, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 1)
    set_key(config, "trainer.balance_batch", False)
    return config


GAE_STEPS = 3


def gae_config(model_dir: Path, out: Path) -> dict[str, Any]:
    """GAE with a KL loss on 2 ranks for 3 steps: the actor, its reference and the critic each
    sharded over both ranks (fsdp_size 2); balance_batch off, as above."""
    config = base_config(model_dir, out, total_training_steps=GAE_STEPS, n_gpus_per_node=2)
    set_key(config, "algorithm.adv_estimator", "gae")
    set_key(config, "actor_rollout_ref.actor.fsdp_config.fsdp_size", 2)
    set_key(config, "critic.model.fsdp_config.fsdp_size", 2)
    set_key(config, "critic.model.use_remove_padding", True)
    set_key(config, "critic.optim.lr", 1e-3)
    set_key(config, "critic.ppo_micro_batch_size_per_gpu", 2)
    set_key(config, "critic.forward_micro_batch_size_per_gpu", 4)
    set_key(config, "trainer.balance_batch", False)
    return config


def _run(config: dict[str, Any], tmp: Path) -> SharedRun:
    result = run_train(config, tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return SharedRun(Path(config["trainer"]["default_local_dir"]), result.stderr)


@pytest.fixture(scope="session")
def two_rank_run(tiny_model_dir, tmp_path_factory) -> SharedRun:
    """`two_rank_config` on the local launcher: trainer/test_sharding's 2-rank side and
    launcher/test_ray_launcher's local reference."""
    tmp = tmp_path_factory.mktemp("shared-two-rank")
    return _run(two_rank_config(tiny_model_dir, tmp / "out"), tmp)


@pytest.fixture(scope="session")
def gae_run(tiny_model_dir, tmp_path_factory) -> SharedRun:
    """`gae_config` (dp 2, sp 1, fsdp_size 2): trainer/test_hsdp_train's sharded side and
    engine/test_ulysses_train's data-parallel side."""
    tmp = tmp_path_factory.mktemp("shared-gae")
    return _run(gae_config(tiny_model_dir, tmp / "out"), tmp)
