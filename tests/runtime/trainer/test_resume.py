"""Exact resume: SIGKILL in the middle of a step, run again, get the uninterrupted run's numbers."""

from __future__ import annotations

import signal

import pytest
import torch

from tests.runtime.trainer.conftest import (
    base_config,
    deterministic,
    read_metrics,
    read_weights,
    run_train,
)

pytestmark = pytest.mark.runtime

TOTAL_STEPS = 4


def config(model_dir, out_dir):
    return base_config(
        model_dir,
        out_dir,
        total_training_steps=TOTAL_STEPS,
        save_freq=1,
        n_gpus_per_node=2,
        max_actor_ckpt_to_keep=2,
    )


@pytest.fixture(scope="module")
def uninterrupted(tiny_model_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("uninterrupted")
    result = run_train(config(tiny_model_dir, tmp / "out"), tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "out"


def test_sigkill_mid_step_then_resume_is_bitwise_identical(uninterrupted, tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    crash = {"KUBERL_FAULT_POINT": "step_middle", "KUBERL_FAULT_STEP": "3"}
    killed = run_train(config(tiny_model_dir, out), tmp_path, env=crash)
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-3000:]
    assert (out / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert sorted(read_metrics(out)) == [1, 2]

    resumed = run_train(config(tiny_model_dir, out), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr

    expected, got = read_metrics(uninterrupted), read_metrics(out)
    assert sorted(got) == list(range(1, TOTAL_STEPS + 1))
    for step in expected:
        assert deterministic(got[step]) == deterministic(expected[step]), f"step {step}"
    for name, tensor in read_weights(uninterrupted / "huggingface").items():
        assert torch.equal(read_weights(out / "huggingface")[name], tensor), name


def test_data_order_continues_where_it_stopped(uninterrupted):
    sampler_2 = torch.load(uninterrupted / "global_step_4" / "data.pt", weights_only=False)
    state = sampler_2["sampler"]
    assert state["epoch"] * 100 + state["batch_in_epoch"] == TOTAL_STEPS  # 400 rows / 4 per batch
    assert sampler_2["global_step"] == TOTAL_STEPS


def test_retention_keeps_the_newest_steps(uninterrupted):
    kept = sorted(p.name for p in uninterrupted.glob("global_step_*"))
    assert kept == ["global_step_3", "global_step_4"]


def test_export_from_a_checkpoint_matches_the_end_of_training_export(uninterrupted, tmp_path):
    import subprocess
    import sys

    target = tmp_path / "merged"
    result = subprocess.run(
        [sys.executable, "-m", "kuberl_cli.main", "export", str(uninterrupted), "-o", str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (target / "config.json").is_file() and (target / "tokenizer.json").is_file()
    final = read_weights(uninterrupted / "huggingface")
    exported = read_weights(target)
    assert exported.keys() == final.keys()
    for name, tensor in final.items():
        assert torch.equal(exported[name], tensor), name
