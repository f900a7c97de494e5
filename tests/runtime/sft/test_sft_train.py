"""SFT on the RL engine: the loss falls, only assistant tokens are trained, resume is exact."""

from __future__ import annotations

import json
import signal

import pytest
import torch

from tests.runtime.sft.conftest import sft_config, two_rank_sft_config
from tests.runtime.trainer.conftest import (
    deterministic,
    read_metrics,
    read_weights,
    run_train,
)

pytestmark = pytest.mark.runtime


def test_sft_loss_falls_and_the_model_is_exported(sft_model_dir, sft_data_dir, tmp_path):
    out = tmp_path / "out"
    config = sft_config(sft_model_dir, sft_data_dir, out, total_training_steps=8, test_freq=4)
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    steps = read_metrics(out)
    losses = [steps[s]["train/loss"] for s in sorted(steps)]
    assert losses[-1] < losses[0] - 0.5, losses
    assert steps[8]["val/loss"] < steps[4]["val/loss"], (steps[4], steps[8])
    assert all(steps[s]["train/global_tokens"] > 0 for s in steps)
    # The merged model differs from the starting one and loads by path.
    trained, start = read_weights(out / "huggingface"), read_weights(sft_model_dir)
    assert any(not torch.equal(trained[k], start[k]) for k in start)
    assert (out / "logs" / "curves.png").stat().st_size > 0
    progress = (out / "logs" / "metrics.jsonl").read_text().splitlines()
    assert len(progress) == 8 and json.loads(progress[0])["step"] == 1


def test_loss_counts_only_assistant_tokens(sft_model_dir, tmp_path):
    """The user turn is never a target: a longer question leaves the trained tokens alone."""
    from transformers import AutoTokenizer

    from kuberl_runtime.sft.data import RenderOptions, _Renderer

    tokenizer = AutoTokenizer.from_pretrained(sft_model_dir)
    renderer = _Renderer(tokenizer, RenderOptions("messages", 512, "error", {}))
    answer = {"role": "assistant", "content": "2 + 3 = 5\n#### 5"}
    short = renderer.render([{"role": "user", "content": "2+3?"}, answer])
    long = renderer.render([{"role": "user", "content": "What is two plus three? " * 3}, answer])
    assert short.response_ids == long.response_ids
    assert short.num_loss_tokens == long.num_loss_tokens == len(short.response_ids)
    trained = tokenizer.decode(short.response_ids)
    assert trained.startswith("2 + 3 = 5") and "<|im_end|>" in trained
    assert "assistant" not in trained and "2+3?" not in tokenizer.decode(short.prompt_ids[-3:])


def test_two_ranks_train_like_one(sft_model_dir, sft_data_dir, two_rank_sft_run, tmp_path):
    """The loss is the global token mean: splitting the batch over ranks does not change it."""
    one = tmp_path / "one"
    assert run_train(sft_config(sft_model_dir, sft_data_dir, one), tmp_path).returncode == 0
    a, b = read_metrics(one), read_metrics(two_rank_sft_run[0])
    assert sorted(a) == sorted(b) == list(range(1, 7))
    for step in a:
        assert b[step]["train/loss"] == pytest.approx(a[step]["train/loss"], rel=1e-5)


def test_sigkill_mid_step_then_resume_is_bitwise_identical(
    sft_model_dir, sft_data_dir, two_rank_sft_run, tmp_path
):
    def config(out):
        return two_rank_sft_config(sft_model_dir, sft_data_dir, out)

    straight, _ = two_rank_sft_run
    out = tmp_path / "out"
    crash = {"KUBERL_FAULT_POINT": "step_middle", "KUBERL_FAULT_STEP": "4"}
    killed = run_train(config(out), tmp_path, env=crash)
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-3000:]
    assert (out / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    resumed = run_train(config(out), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr
    expected, got = read_metrics(straight), read_metrics(out)
    assert sorted(got) == sorted(expected) == list(range(1, 7))
    for step in expected:
        assert deterministic(got[step]) == deterministic(expected[step]), step
    for name, tensor in read_weights(straight / "huggingface").items():
        assert torch.equal(read_weights(out / "huggingface")[name], tensor), name
    assert sorted(p.name for p in out.glob("global_step_*")) == ["global_step_4", "global_step_6"]
