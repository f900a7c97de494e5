"""GRPO on CPU whose model and training data are s3:// URLs on the real S3 server.

The first run (two ranks on one node: one copies, the other finds the copy current) copies the
model directory and the parquet file into the input cache under its output directory and
trains; a second run on the same output directory copies nothing (the log says the cache holds
them) and trains alike; a wrong credential stops the run before any training, naming the Secret
and never its value.
"""

from __future__ import annotations

import pytest

from support.s3 import s3fs_for
from tests.runtime.trainer.conftest import (
    DATA_DIR,
    base_config,
    deterministic,
    read_metrics,
    run_train,
    set_key,
)

pytestmark = pytest.mark.runtime


def remote_config(bucket: str, model_dir, out_dir):
    config = base_config(model_dir, out_dir, total_training_steps=2, n_gpus_per_node=2)
    set_key(config, "actor_rollout_ref.model.path", f"s3://{bucket}/models/tiny")
    set_key(config, "data.train_files", f"s3://{bucket}/data/train.parquet")
    return config


def test_a_run_reads_its_model_and_data_from_s3_and_a_second_run_reuses_the_cache(
    s3_server, s3_bucket, tiny_model_dir, tmp_path
):
    fs = s3fs_for(s3_server)
    fs.put(str(tiny_model_dir), f"{s3_bucket}/models/tiny", recursive=True)
    fs.put(str(DATA_DIR / "train.parquet"), f"{s3_bucket}/data/train.parquet")
    env = {**s3_server.env(), "KUBERL_STORAGE_SECRET": "training-s3"}
    out = tmp_path / "out"
    model_url = f"s3://{s3_bucket}/models/tiny"

    first = run_train(remote_config(s3_bucket, tiny_model_dir, out), tmp_path, env)
    assert first.returncode == 0, first.stderr[-3000:]
    # Two ranks on one node: one copies, the other waits on the lock and finds it current.
    assert first.stderr.count(f"initializer: copying {model_url}") == 1
    assert first.stderr.count(f"initializer: {model_url} is in the cache") == 1
    assert f"initializer: copying s3://{s3_bucket}/data/train.parquet" in first.stderr
    cached = out / "cache" / "inputs" / "s3" / s3_bucket / "models" / "tiny"
    assert sorted(p.name for p in cached.iterdir()) == sorted(
        p.name for p in tiny_model_dir.iterdir()
    )
    first_metrics = read_metrics(out)
    assert sorted(first_metrics) == [1, 2]

    # The same output directory (a volume kept across attempts), so the same cache.
    (out / "logs" / "metrics.jsonl").rename(tmp_path / "first-metrics.jsonl")
    second = run_train(remote_config(s3_bucket, tiny_model_dir, out), tmp_path, env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "initializer: copying" not in second.stderr
    assert f"initializer: {model_url} is in the cache" in second.stderr
    second_metrics = read_metrics(out)
    assert deterministic(second_metrics[2]) == deterministic(first_metrics[2])


def test_a_wrong_credential_for_the_model_names_the_secret(
    s3_server, s3_bucket, tiny_model_dir, tmp_path
):
    fs = s3fs_for(s3_server)
    fs.put(str(tiny_model_dir), f"{s3_bucket}/models/tiny", recursive=True)
    env = {
        **s3_server.env(),
        "AWS_SECRET_ACCESS_KEY": "wrong-secret-value",
        "KUBERL_STORAGE_SECRET": "training-s3",
    }
    out = tmp_path / "out"
    result = run_train(remote_config(s3_bucket, tiny_model_dir, out), tmp_path, env)
    assert result.returncode != 0
    assert "access denied" in result.stderr and "Secret 'training-s3'" in result.stderr
    assert "wrong-secret-value" not in result.stderr + result.stdout
    assert not (out / "logs" / "metrics.jsonl").exists()
