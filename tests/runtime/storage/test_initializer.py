"""The model/data initializer against the real S3 server (SeaweedFS on 127.0.0.1).

A prefix (a model directory) and a single object (a parquet file) are copied into the cache; a
second call copies nothing; a changed object is copied again; a cut-short copy of the same object
is resumed from its end, one of another object starts again; two ranks of one node copy once;
a wrong credential names the Secret; the plan's URLs become the cached paths.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from kuberl_api.plan.remote_inputs import cache_path, remote_inputs
from kuberl_api.plan.sections import RemoteInputPlan
from kuberl_runtime.checkpoint.remote import StorageAccessError
from kuberl_runtime.initializer import STATE_DIR, fetch_input, localized
from kuberl_runtime.reporting.k8s import StatusReporter
from support.s3 import s3fs_for

pytestmark = pytest.mark.runtime
MODEL_FILES = {"config.json": b'{"a": 1}', "model.safetensors": bytes(range(256)) * 4096}


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KUBERL_STORAGE_SECRET", "training-s3")
    return s3_server


def upload(server, bucket: str, files: dict[str, bytes], prefix: str) -> None:
    fs = s3fs_for(server)
    for name, data in files.items():
        fs.pipe(f"{bucket}/{prefix}/{name}", data)


def item_for(url: str, cache: Path) -> RemoteInputPlan:
    return RemoteInputPlan(url=url, local_path=cache_path(url, str(cache)))


def test_a_prefix_is_copied_once_and_again_when_it_changes(s3_env, s3_bucket, tmp_path):
    upload(s3_env, s3_bucket, MODEL_FILES, "models/tiny")
    item = item_for(f"s3://{s3_bucket}/models/tiny", tmp_path)
    beats: list[tuple[int, int]] = []
    total = sum(len(v) for v in MODEL_FILES.values())

    assert fetch_input(item, tmp_path, lambda done, all_: beats.append((done, all_))) == total
    local = Path(item.local_path)
    assert local == tmp_path / "s3" / s3_bucket / "models" / "tiny"
    for name, data in MODEL_FILES.items():
        assert (local / name).read_bytes() == data
    assert beats[-1] == (total, total)
    assert fetch_input(item, tmp_path) == 0  # the cache holds the same objects

    upload(s3_env, s3_bucket, {"config.json": b'{"a": 2}'}, "models/tiny")
    assert fetch_input(item, tmp_path) == len(b'{"a": 2}')  # only the changed object
    assert (local / "config.json").read_bytes() == b'{"a": 2}'


def test_a_cut_short_copy_resumes_and_a_stale_one_starts_again(s3_env, s3_bucket, tmp_path):
    data = MODEL_FILES["model.safetensors"]
    upload(s3_env, s3_bucket, {"train.parquet": data}, "data")
    item = item_for(f"s3://{s3_bucket}/data/train.parquet", tmp_path)
    assert fetch_input(item, tmp_path) == len(data)
    state = tmp_path / STATE_DIR / Path(item.local_path).relative_to(tmp_path)
    identity = json.loads(Path(f"{state}.json").read_text())["identity"]

    # A copy killed at 1000 bytes: nothing in place, the partial file and its object's identity.
    Path(item.local_path).unlink()
    Path(f"{state}.json").unlink()
    Path(f"{state}.partial").write_bytes(data[:1000])
    Path(f"{state}.partial.json").write_text(json.dumps({"identity": identity}))
    assert fetch_input(item, tmp_path) == len(data) - 1000
    assert Path(item.local_path).read_bytes() == data
    assert not Path(f"{state}.partial").exists()

    # A partial copy of another version of the object is not continued.
    Path(item.local_path).unlink()
    Path(f"{state}.partial").write_bytes(b"x" * 1000)
    Path(f"{state}.partial.json").write_text(json.dumps({"identity": "etag:older"}))
    assert fetch_input(item, tmp_path) == len(data)
    assert Path(item.local_path).read_bytes() == data


def test_the_ranks_of_a_node_copy_once(s3_env, s3_bucket, tmp_path):
    upload(s3_env, s3_bucket, MODEL_FILES, "models/tiny")
    item = item_for(f"s3://{s3_bucket}/models/tiny", tmp_path)
    copied: list[int] = []

    def rank() -> None:
        copied.append(fetch_input(item, tmp_path))

    ranks = [threading.Thread(target=rank) for _ in range(4)]
    for thread in ranks:
        thread.start()
    for thread in ranks:
        thread.join()
    assert sorted(copied) == [0, 0, 0, sum(len(v) for v in MODEL_FILES.values())]


def test_a_wrong_credential_names_the_secret(s3_env, s3_bucket, tmp_path, monkeypatch):
    upload(s3_env, s3_bucket, MODEL_FILES, "models/tiny")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
    item = item_for(f"s3://{s3_bucket}/models/tiny", tmp_path)
    with pytest.raises(StorageAccessError) as err:
        fetch_input(item, tmp_path)
    assert "Secret 'training-s3'" in str(err.value)
    assert "wrong-secret-value" not in str(err.value)


def test_a_missing_object_names_the_url(s3_env, s3_bucket, tmp_path):
    item = item_for(f"s3://{s3_bucket}/models/none", tmp_path)
    with pytest.raises(FileNotFoundError, match=f"s3://{s3_bucket}/models/none"):
        fetch_input(item, tmp_path)


def test_the_plan_reads_the_cached_paths(tmp_path):
    from tests.api.plan.test_remote_inputs import remote_plan

    plan = remote_plan(tmp_path)
    local = localized(plan, plan.paths.remote_inputs)
    cache = tmp_path / "out" / "cache" / "inputs" / "s3" / "bucket"
    assert local.model.path == str(cache / "models" / "tiny")
    assert local.data.tokenizer == str(cache / "models" / "tiny")
    assert local.data.train_files == [str(cache / "data" / "train.parquet")]
    assert local.critic.model.path == str(cache / "models" / "tiny")
    assert local.source == plan.source  # the record keeps the URLs


def test_the_heartbeat_goes_on_the_job_status():
    sent: list[dict] = []
    clock = iter([0.0, 0.5, 1.0, 5.0, 6.0])
    reporter = StatusReporter(sent.append, clock=lambda: next(clock))
    reporter.on_initializing(10, 100)
    reporter.on_initializing(20, 100)  # within min_interval: dropped
    reporter.on_initializing(60, 100)
    reporter.on_initializing(100, 100)  # the end always goes
    metrics = [s["progress"]["metrics"]["initializer/copied_bytes"] for s in sent]
    assert metrics == [10.0, 60.0, 100.0]
    assert all(s["progress"]["globalStep"] == 0 for s in sent)


def test_hub_ids_and_local_paths_are_not_remote():
    assert remote_inputs(["Qwen/Qwen2.5-0.5B", "/models/x", ""], "/c") == []
    [item] = remote_inputs(["file:///mnt/models/x", "file:///mnt/models/x"], "/c")
    assert item.local_path == "/mnt/models/x"
