"""`kuberl train` with Ulysses sequence parallelism: two ranks as one SP group (dp 1, sp 2)
train exactly like two data-parallel ranks (dp 2, sp 1): GAE with a KL loss, so the actor, the
reference and the critic all run split sequences (the runtime logs the dp x sp layout it built).
An SP run killed in the middle of a step resumes bitwise like today's runs: the uninterrupted
SP run is one run, the SP side of the comparison and the resume's reference.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import torch

from tests.runtime.trainer.conftest import (
    assert_same_training,
    base_config,
    deterministic,
    read_metrics,
    read_weights,
    run_train,
    set_key,
)

pytestmark = pytest.mark.runtime


STEPS = 3


def sp_config(model_path: Path, out: Path, sp: int) -> dict:
    """GAE with a KL loss on two ranks, a checkpoint every step, `sp` ranks per SP group."""
    config = base_config(
        model_path, out, total_training_steps=STEPS, save_freq=1, n_gpus_per_node=2
    )
    set_key(config, "actor_rollout_ref.actor.ulysses_sequence_parallel_size", sp)
    set_key(config, "algorithm.adv_estimator", "gae")
    set_key(config, "critic.optim.lr", 1e-3)
    set_key(config, "critic.ppo_micro_batch_size_per_gpu", 2)
    set_key(config, "critic.forward_micro_batch_size_per_gpu", 4)
    set_key(config, "critic.model.use_remove_padding", True)
    # verl's balance_batch groups rows per DP rank, so it depends on dp (2 vs 1).
    set_key(config, "trainer.balance_batch", False)
    return config


@pytest.fixture(scope="module")
def sp_run(tiny_model_path, tmp_path_factory) -> tuple[Path, str]:
    """One uninterrupted dp 1 x sp 2 run (its output and log), read by the tests below."""
    tmp = tmp_path_factory.mktemp("sp-run")
    result = run_train(sp_config(tiny_model_path, tmp / "out", 2), tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "out", result.stderr


def test_sp_two_ranks_train_like_dp_two_ranks(sp_run, tiny_model_path, tmp_path):
    sp_out, sp_log = sp_run
    assert "dp 1 x sp 2" in sp_log, sp_log[-3000:]
    dp_out = tmp_path / "sp1"
    config = sp_config(tiny_model_path, dp_out, 1)
    set_key(config, "trainer.save_freq", -1)  # checkpoints do not change training: none here
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "dp 1 x sp 2" not in result.stderr, result.stderr[-3000:]
    assert_same_training(dp_out, sp_out, list(range(1, STEPS + 1)))


def test_sp_run_killed_mid_step_resumes_bitwise(sp_run, tiny_model_path, tmp_path):
    whole, _ = sp_run
    out = tmp_path / "out"
    crash = {"KUBERL_FAULT_POINT": "step_middle", "KUBERL_FAULT_STEP": "3"}
    killed = run_train(sp_config(tiny_model_path, out, 2), tmp_path, env=crash)
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-3000:]
    assert (out / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    resumed = run_train(sp_config(tiny_model_path, out, 2), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr and "dp 1 x sp 2" in resumed.stderr

    expected, got = read_metrics(whole), read_metrics(out)
    assert sorted(got) == [1, 2, 3]
    for step in expected:
        assert deterministic(got[step]) == deterministic(expected[step]), f"step {step}"
    for name, tensor in read_weights(whole / "huggingface").items():
        assert torch.equal(read_weights(out / "huggingface")[name], tensor), name
