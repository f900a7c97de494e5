"""SFT with its model and data on the real S3 server and its checkpoints mirrored there
(``trainer.default_hdfs_dir``, refused for SFT before): a fresh output directory (a new node)
resumes from the store's newest step."""

from __future__ import annotations

import pytest

from kuberl_runtime.checkpoint.manifest import MANIFEST_FILE
from support.s3 import s3fs_for
from tests.runtime.sft.conftest import sft_config
from tests.runtime.trainer.conftest import read_metrics, run_train, set_key

pytestmark = pytest.mark.runtime


def remote_sft(bucket: str, model_dir, data_dir, out_dir, steps: int):
    config = sft_config(model_dir, data_dir, out_dir, total_training_steps=steps, save_freq=2)
    set_key(config, "model.path", f"s3://{bucket}/models/tiny")
    set_key(config, "data.train_files", f"s3://{bucket}/sft/train.parquet")
    set_key(config, "data.val_files", f"s3://{bucket}/sft/test.parquet")
    set_key(config, "trainer.default_hdfs_dir", f"s3://{bucket}/sft-run")
    return config


def test_sft_reads_s3_inputs_mirrors_checkpoints_and_resumes_on_a_fresh_node(
    s3_server, s3_bucket, sft_model_dir, sft_data_dir, tmp_path
):
    fs = s3fs_for(s3_server)
    fs.put(str(sft_model_dir), f"{s3_bucket}/models/tiny", recursive=True)
    for name in ("train.parquet", "test.parquet"):
        fs.put(str(sft_data_dir / name), f"{s3_bucket}/sft/{name}")
    env = s3_server.env()

    node_a = tmp_path / "node-a"
    first = run_train(remote_sft(s3_bucket, sft_model_dir, sft_data_dir, node_a, 4), tmp_path, env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert f"initializer: copying s3://{s3_bucket}/models/tiny" in first.stderr
    for step in (2, 4):
        assert fs.exists(f"{s3_bucket}/sft-run/global_step_{step}/{MANIFEST_FILE}")

    node_b = tmp_path / "node-b"
    resumed = run_train(
        remote_sft(s3_bucket, sft_model_dir, sft_data_dir, node_b, 6), tmp_path, env
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"the newest checkpoint is on s3://{s3_bucket}/sft-run: step 4" in resumed.stderr
    assert sorted(read_metrics(node_b)) == [5, 6]
    assert fs.exists(f"{s3_bucket}/sft-run/global_step_6/{MANIFEST_FILE}")
