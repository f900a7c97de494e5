"""Checkpoints mirrored to the real S3 server by a CPU training run (trainer.default_hdfs_dir).

An uninterrupted 2-rank run (its uploads held until the next step trained: they overlap
training) and a run killed in the middle of uploading step 3; a third run on a fresh local
directory (a new node: nothing on disk) resumes from the object store, skips the partial step 3
(no manifest) for the complete step 2, and ends with the uninterrupted run's weights.
trainer.resume_from_path as a URL: the partial step is refused, a complete one resumes to the
same weights in a run whose af_output_dir is a URL (checkpoints, logs and model uploaded
there). A wrong credential stops the run at start with an error naming the Secret.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
import torch

from kuberl_api.storage import output_location
from kuberl_runtime.checkpoint.manifest import MANIFEST_FILE
from kuberl_runtime.checkpoint.uploads import HOLD_POINT
from kuberl_runtime.faults import FAULT_POINT_ENV
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
    # Each upload holds, its shards on the store, until the run next waits for it: the manifest
    # of step N is written only after step N+1 trained, which a blocking upload never reaches.
    held = {**env, FAULT_POINT_ENV: HOLD_POINT}
    whole = run_train(
        config(tiny_model_dir, tmp_path / "whole", f"s3://{s3_bucket}/whole"), tmp_path, held
    )
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert steps_on(fs, f"{s3_bucket}/whole") == ["global_step_2", "global_step_3"]  # keep 2
    log = whole.stderr
    for step in (1, 2):
        overlap = f"saving step {step + 1} while the upload of step {step} is in flight"
        assert overlap in log, log[-3000:]  # step N+1 trained meanwhile (rank 0 logs)
        assert log.index(overlap) < log.index(f"uploaded step {step} to s3://"), log[-3000:]
    assert "the run is ending while the upload of step 3 is in flight" in log
    assert log.index("the run is ending while") < log.index("uploaded step 3 to s3://")

    mirror = f"s3://{s3_bucket}/run"
    crash = {**env, "KUBERL_FAULT_POINT": "checkpoint_upload", "KUBERL_FAULT_STEP": "3"}
    killed = run_train(config(tiny_model_dir, tmp_path / "node-a", mirror), tmp_path, crash)
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-3000:]
    assert fs.exists(f"{s3_bucket}/run/global_step_2/{MANIFEST_FILE}")
    assert fs.exists(f"{s3_bucket}/run/global_step_3")
    assert not fs.exists(f"{s3_bucket}/run/global_step_3/{MANIFEST_FILE}")
    # resume_from_path naming the partial step: copied, then refused before any step trains
    refused = run_train(
        resume_from(tiny_model_dir, tmp_path / "node-p", f"{mirror}/global_step_3"), tmp_path, env
    )
    assert refused.returncode != 0
    assert f"trainer.resume_from_path {mirror}/global_step_3: no {MANIFEST_FILE}" in refused.stderr
    assert not (tmp_path / "node-p" / "logs" / "metrics.jsonl").exists()

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

    # resume_from_path as a URL: the uploaded step 2 is copied like a model, checked against its
    # manifest, and resumed from; af_output_dir is a URL too: the run writes its staging
    # directory and uploads step 3, the logs and the merged model there; step 3 ends alike
    staging = Path(output_location(f"s3://{s3_bucket}/out"))
    envelope = {
        "af_output_dir": f"s3://{s3_bucket}/out",
        "backend_config": resume_from(tiny_model_dir, "checkpoints", f"{mirror}/global_step_2"),
    }
    try:
        from_url = run_train(envelope, tmp_path, env)
        assert from_url.returncode == 0, from_url.stderr[-3000:]
        assert sorted(read_metrics(staging)) == [3]
    finally:
        shutil.rmtree(staging.parent, ignore_errors=True)  # the test bucket's own directory
    out = f"{s3_bucket}/out"
    assert steps_on(fs, f"{out}/checkpoints") == ["global_step_3"]
    for uploaded in ("checkpoints/global_step_3", "huggingface", "logs"):
        assert fs.exists(f"{out}/{uploaded}/{MANIFEST_FILE}"), uploaded
    assert '"step": 3' in fs.cat_file(f"{out}/logs/metrics.jsonl").decode()
    fs.get(f"{out}/huggingface", str(tmp_path / "hf-from-s3"), recursive=True)
    for name, tensor in read_weights(tmp_path / "hf-from-s3").items():
        assert torch.equal(tensor, final[name]), name


def resume_from(model_dir, out_dir, url):
    cfg = config(model_dir, out_dir, None)
    cfg["trainer"].update(resume_mode="resume_path", resume_from_path=url)
    return cfg


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
