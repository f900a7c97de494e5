"""CheckpointMirror against the real S3 server: manifest last, partial steps ignored and pruned,
retention applied remotely, downloads checked, and a wrong credential named, never retried."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from kuberl_api.storage import CREDENTIALS_SECRET_ENV, mirror_url
from kuberl_runtime.checkpoint.manifest import MANIFEST_FILE, owner
from kuberl_runtime.checkpoint.remote import (
    CheckpointMirror,
    StorageAccessError,
    StorageTransferError,
)
from kuberl_runtime.distributed import RankInfo
from support.s3 import s3fs_for

pytestmark = pytest.mark.runtime
ONE_RANK = RankInfo(rank=0, world_size=1, local_rank=0)


@pytest.fixture
def credentials(s3_server, monkeypatch):
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server


def fake_step(root: Path, step: int) -> Path:
    step_dir = root / f"global_step_{step}"
    (step_dir / "actor").mkdir(parents=True)
    (step_dir / "actor" / "__0_0.distcp").write_bytes(os.urandom(3000 + step))
    (step_dir / "actor" / ".metadata").write_bytes(b"meta")
    (step_dir / "extra_state_rank_0.pt").write_bytes(b"extra")
    (step_dir / "data.pt").write_bytes(b"data")
    return step_dir


def test_owner_of_each_file():
    assert owner("actor/__3_0.distcp") == 3
    assert owner("extra_state_rank_2.pt") == 2
    assert owner("actor/.metadata") == owner("data.pt") == owner("actor/huggingface/x.json") == 0


def test_upload_writes_every_shard_and_the_manifest_last(credentials, s3_bucket, tmp_path):
    mirror = CheckpointMirror(f"s3://{s3_bucket}/run", ONE_RANK)
    mirror.upload(fake_step(tmp_path, 1), 1)
    manifest = mirror.manifest(1)
    assert manifest is not None and manifest.step == 1 and manifest.world_size == 1
    listed = {s.path: s for s in manifest.shards}
    assert sorted(listed) == [
        "actor/.metadata",
        "actor/__0_0.distcp",
        "data.pt",
        "extra_state_rank_0.pt",
    ]
    assert listed["actor/__0_0.distcp"].size == 3001
    fs = s3fs_for(credentials)
    record = json.loads(fs.cat_file(f"{s3_bucket}/run/global_step_1/{MANIFEST_FILE}"))
    assert record["shards"][0]["sha256"] and record["version"] == 1


def test_a_home_relative_local_mirror_lands_under_home(tmp_path, monkeypatch):
    """verl's documented default_hdfs_dir (~/experiments/...) as the plan writes it."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    mirror = CheckpointMirror(mirror_url("~/experiments/ppo/"), ONE_RANK)
    mirror.upload(fake_step(tmp_path / "local", 2), 2)
    copied = tmp_path / "home" / "experiments" / "ppo" / "global_step_2"
    assert (copied / MANIFEST_FILE).exists()
    assert (copied / "actor" / "__0_0.distcp").stat().st_size == 3002
    assert mirror.latest_complete() is not None and mirror.latest_complete()[0] == 2


def test_a_step_without_manifest_or_with_a_short_shard_is_not_complete(
    credentials, s3_bucket, tmp_path
):
    mirror = CheckpointMirror(f"s3://{s3_bucket}/run", ONE_RANK)
    mirror.upload(fake_step(tmp_path, 1), 1)
    mirror.upload(fake_step(tmp_path, 2), 2)
    fs = s3fs_for(credentials)
    fs.rm(f"{s3_bucket}/run/global_step_2/{MANIFEST_FILE}")
    fs.pipe(f"{s3_bucket}/run/global_step_3/actor/__0_0.distcp", b"half")  # killed mid-upload
    assert mirror.steps() == [1, 2, 3]
    assert mirror.manifest(2) is None and mirror.manifest(3) is None
    latest = mirror.latest_complete()
    assert latest is not None and latest[0] == 1
    fs.pipe(f"{s3_bucket}/run/global_step_1/actor/__0_0.distcp", b"truncated")
    assert mirror.latest_complete() is None


def test_retention_applies_remotely_and_drops_interrupted_uploads(credentials, s3_bucket, tmp_path):
    mirror = CheckpointMirror(f"s3://{s3_bucket}/run", ONE_RANK, max_to_keep=2)
    mirror.upload(fake_step(tmp_path, 1), 1)
    s3fs_for(credentials).pipe(f"{s3_bucket}/run/global_step_2/data.pt", b"partial")
    for step in (3, 4):
        mirror.upload(fake_step(tmp_path, step), step)
    assert mirror.steps() == [3, 4]


def test_download_restores_the_step_and_checks_digests(credentials, s3_bucket, tmp_path):
    source = fake_step(tmp_path / "a", 5)
    mirror = CheckpointMirror(f"s3://{s3_bucket}/run", ONE_RANK)
    mirror.upload(source, 5)
    step, manifest = mirror.latest_complete()
    target = tmp_path / "fresh" / "global_step_5"
    mirror.download(step, manifest, target)
    for path in source.rglob("*"):
        if path.is_file():
            assert (target / path.relative_to(source)).read_bytes() == path.read_bytes()
    fs = s3fs_for(credentials)
    fs.pipe(f"{s3_bucket}/run/global_step_5/data.pt", b"DATA")  # same size, other bytes
    with pytest.raises(StorageTransferError, match=r"data.pt does not match the manifest"):
        mirror.download(step, manifest, tmp_path / "other" / "global_step_5")


def test_a_wrong_secret_names_the_secret_and_is_not_retried(
    credentials, s3_bucket, monkeypatch, caplog
):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
    monkeypatch.setenv(CREDENTIALS_SECRET_ENV, "training-s3")
    mirror = CheckpointMirror(f"s3://{s3_bucket}/run", ONE_RANK)
    with caplog.at_level(logging.WARNING), pytest.raises(StorageAccessError) as err:
        mirror.check_access()
    message = str(err.value)
    assert "access denied" in message and "Secret 'training-s3'" in message
    assert "spec.storage.credentials.secretRef" in message
    assert "wrong-secret-value" not in message and credentials.access_key not in caplog.text
    assert not [r for r in caplog.records if "retry" in r.getMessage()]


def test_a_rank_without_the_step_directory_fails_the_upload(credentials, s3_bucket, tmp_path):
    mirror = CheckpointMirror(f"s3://{s3_bucket}/run", ONE_RANK)
    with pytest.raises(StorageTransferError, match=r"not on this rank's disk"):
        mirror.upload(tmp_path / "global_step_7", 7)
    assert mirror.manifest(7) is None
