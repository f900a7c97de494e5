"""`kuberl train` with Ulysses sequence parallelism: two ranks as one SP group (dp 1, sp 2)
train exactly like two data-parallel ranks (dp 2, sp 1): GAE with a KL loss, so the actor, the
reference and the critic all run split sequences (the runtime logs the dp x sp layout it built).
An SP run killed in the middle of a step resumes bitwise like today's runs. The dp 2 side is the
session's shared GAE run (tests/runtime/conftest.py); the uninterrupted SP run is both the other
side and the resume's reference.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import torch

from tests.runtime.conftest import GAE_STEPS, gae_config
from tests.runtime.trainer.conftest import (
    assert_same_training,
    deterministic,
    read_metrics,
    read_weights,
    run_train,
    set_key,
)

pytestmark = pytest.mark.runtime


def sp_config(model_dir: Path, out: Path) -> dict:
    """The shared GAE run's config as one SP group of two ranks, a checkpoint every step."""
    config = gae_config(model_dir, out)
    set_key(config, "actor_rollout_ref.actor.ulysses_sequence_parallel_size", 2)
    set_key(config, "trainer.save_freq", 1)
    return config


@pytest.fixture(scope="module")
def sp_run(tiny_model_dir, tmp_path_factory) -> tuple[Path, str]:
    """One uninterrupted dp 1 x sp 2 run (its output and log), read by the tests below."""
    tmp = tmp_path_factory.mktemp("sp-run")
    result = run_train(sp_config(tiny_model_dir, tmp / "out"), tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "out", result.stderr


def test_sp_two_ranks_train_like_dp_two_ranks(sp_run, gae_run):
    sp_out, sp_log = sp_run
    assert "dp 1 x sp 2" in sp_log, sp_log[-3000:]
    assert "dp 1 x sp 2" not in gae_run.log, gae_run.log[-3000:]
    assert_same_training(gae_run.out, sp_out, list(range(1, GAE_STEPS + 1)))


def test_sp_run_killed_mid_step_resumes_bitwise(sp_run, tiny_model_dir, tmp_path):
    whole, _ = sp_run
    out = tmp_path / "out"
    crash = {"KUBERL_FAULT_POINT": "step_middle", "KUBERL_FAULT_STEP": "3"}
    killed = run_train(sp_config(tiny_model_dir, out), tmp_path, env=crash)
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-3000:]
    assert (out / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    resumed = run_train(sp_config(tiny_model_dir, out), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr and "dp 1 x sp 2" in resumed.stderr

    expected, got = read_metrics(whole), read_metrics(out)
    assert sorted(got) == [1, 2, 3]
    for step in expected:
        assert deterministic(got[step]) == deterministic(expected[step]), f"step {step}"
    for name, tensor in read_weights(whole / "huggingface").items():
        assert torch.equal(read_weights(out / "huggingface")[name], tensor), name
