"""A crash while a checkpoint is being written leaves the previous one in charge."""

from __future__ import annotations

import signal

import pytest

from kuberl_runtime.checkpoint import CheckpointManager
from kuberl_runtime.distributed import RankInfo
from tests.runtime.trainer.conftest import base_config, read_metrics, run_train

pytestmark = pytest.mark.runtime


def test_crash_during_checkpoint_write_resumes_from_previous_step(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    config = base_config(tiny_model_dir, out, total_training_steps=3, save_freq=1)
    crash = {"KUBERL_FAULT_POINT": "checkpoint_write", "KUBERL_FAULT_STEP": "2"}
    killed = run_train(config, tmp_path, env=crash)
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-3000:]
    assert (out / ".tmp-global_step_2").is_dir()
    assert not (out / "global_step_2").exists()
    assert CheckpointManager(out, RankInfo(0, 1, 0)).latest_step() == 1

    resumed = run_train(config, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr and "global_step_1" in resumed.stderr
    assert not (out / ".tmp-global_step_2").exists()
    assert sorted(read_metrics(out)) == [1, 2, 3]
    assert (out / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    assert (out / "huggingface" / "model.safetensors").is_file()


def test_resume_on_a_different_number_of_ranks(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    config = base_config(tiny_model_dir, out, total_training_steps=1, save_freq=1)
    assert run_train(config, tmp_path).returncode == 0
    config["trainer"].update(total_training_steps=2, n_gpus_per_node=2)
    resumed = run_train(config, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr
    assert sorted(read_metrics(out)) == [1, 2]
