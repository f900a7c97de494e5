"""A killed multi-turn run resumes bitwise: SIGKILL in the middle of step 2 (after its tool-using
rollouts), run again, get the uninterrupted run's metrics and weights exactly. Each turn's
sampling seed comes from (seed, step, row, turn) and tool instances live within a trajectory,
so nothing of a rollout outlives its step."""

from __future__ import annotations

import signal

import pytest
import torch

from tests.runtime.trainer.conftest import deterministic, read_metrics, read_weights, run_train
from tests.runtime.trainer.test_multi_turn_train import multi_turn_config, teach

pytestmark = pytest.mark.runtime

STEPS = 3


def test_sigkill_mid_step_then_resume_is_bitwise_identical(tiny_model_dir, tmp_path):
    model = teach(tiny_model_dir, tmp_path / "taught")

    def config(out):
        return multi_turn_config(model, out, tmp_path, total_training_steps=STEPS, save_freq=1)

    whole = tmp_path / "whole"
    assert run_train(config(whole), tmp_path).returncode == 0
    out = tmp_path / "out"
    crash = {"KUBERL_FAULT_POINT": "step_middle", "KUBERL_FAULT_STEP": "2"}
    killed = run_train(config(out), tmp_path, env=crash)
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-3000:]
    assert sorted(read_metrics(out)) == [1]
    resumed = run_train(config(out), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr

    expected, got = read_metrics(whole), read_metrics(out)
    assert sorted(got) == list(range(1, STEPS + 1))
    assert expected[2]["tool/calculator/calls"] > 0  # the step that was killed used the tool
    for step in expected:
        assert deterministic(got[step]) == deterministic(expected[step]), f"step {step}"
    for name, tensor in read_weights(whole / "huggingface").items():
        assert torch.equal(read_weights(out / "huggingface")[name], tensor), name
