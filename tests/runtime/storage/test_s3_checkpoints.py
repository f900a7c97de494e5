"""Checkpoints mirrored to the real S3 server by a CPU training run (trainer.default_hdfs_dir).

An uninterrupted 2-rank run and a run killed in the middle of uploading step 3; a third run on a
fresh local directory (a new node: nothing on disk) resumes from the object store, skips the
partial step 3 (no manifest) for the complete step 2, and ends with the uninterrupted run's
weights. A wrong credential stops the run at start with an error naming the Secret.
"""

from __future__ import annotations

import signal

import pytest
import torch

from kuberl_runtime.checkpoint.manifest import MANIFEST_FILE
from support.s3 import s3fs_for
from tests.runtime.trainer.conftest import (
    base_config,
    deterministic,
    read_metrics,
    read_weights,
    run_train,
)

pytestmark = pytest.mark.runtime
STEPS = 3


def steps_on(fs, prefix: str) -> list[str]:
    """Step directories holding objects (SeaweedFS lists an emptied prefix as a directory)."""
    return sorted({path[len(prefix) + 1 :].split("/", 1)[0] for path in fs.find(prefix)})


def config(model_dir, out_dir, mirror):
    return base_config(
        model_dir,
        out_dir,
        total_training_steps=STEPS,
        save_freq=1,
        n_gpus_per_node=2,
        max_actor_ckpt_to_keep=2,
        default_hdfs_dir=mirror,
    )


def test_a_fresh_run_resumes_from_the_store_past_a_partial_upload(
    s3_server, s3_bucket, tiny_model_dir, tmp_path
):
    env = s3_server.env()
    fs = s3fs_for(s3_server)
    whole = run_train(
        config(tiny_model_dir, tmp_path / "whole", f"s3://{s3_bucket}/whole"), tmp_path, env
    )
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert steps_on(fs, f"{s3_bucket}/whole") == ["global_step_2", "global_step_3"]  # keep 2

    mirror = f"s3://{s3_bucket}/run"
    crash = {**env, "KUBERL_FAULT_POINT": "checkpoint_upload", "KUBERL_FAULT_STEP": "3"}
    killed = run_train(config(tiny_model_dir, tmp_path / "node-a", mirror), tmp_path, crash)
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-3000:]
    assert fs.exists(f"{s3_bucket}/run/global_step_2/{MANIFEST_FILE}")
    assert fs.exists(f"{s3_bucket}/run/global_step_3")
    assert not fs.exists(f"{s3_bucket}/run/global_step_3/{MANIFEST_FILE}")

    fresh = tmp_path / "node-b"
    resumed = run_train(config(tiny_model_dir, fresh, mirror), tmp_path, env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"step 3 on {mirror} is incomplete" in resumed.stderr
    assert f"the newest checkpoint is on {mirror}: step 2" in resumed.stderr
    assert sorted(read_metrics(fresh)) == [3]
    expected = read_metrics(tmp_path / "whole")
    assert deterministic(read_metrics(fresh)[3]) == deterministic(expected[3])
    final = read_weights(tmp_path / "whole" / "huggingface")
    for name, tensor in read_weights(fresh / "huggingface").items():
        assert torch.equal(tensor, final[name]), name
    assert fs.exists(f"{s3_bucket}/run/global_step_3/{MANIFEST_FILE}")


def test_a_wrong_credential_stops_the_run_at_start_naming_the_secret(
    s3_server, s3_bucket, tiny_model_dir, tmp_path
):
    env = {
        **s3_server.env(),
        "AWS_SECRET_ACCESS_KEY": "wrong-secret-value",
        "KUBERL_STORAGE_SECRET": "training-s3",
    }
    out = tmp_path / "out"
    result = run_train(config(tiny_model_dir, out, f"s3://{s3_bucket}/run"), tmp_path, env)
    assert result.returncode != 0
    assert "access denied" in result.stderr and "Secret 'training-s3'" in result.stderr
    assert "wrong-secret-value" not in result.stderr + result.stdout
    assert "retry" not in result.stderr
    assert not (out / "logs" / "metrics.jsonl").exists() or not read_metrics(out)
