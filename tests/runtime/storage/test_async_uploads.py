"""Checkpoint uploads off the training thread (checkpoint/uploads.py), against the real S3 server:
``start`` returns before the step's manifest is written, ``wait`` finishes it, a failed upload is
raised by the next wait, and one upload is in flight at a time."""

from __future__ import annotations

import pytest

from kuberl_runtime.checkpoint.remote import CheckpointMirror, StorageTransferError
from kuberl_runtime.checkpoint.uploads import HOLD_POINT, AsyncUploads
from kuberl_runtime.faults import FAULT_POINT_ENV
from tests.runtime.storage.test_checkpoint_mirror import ONE_RANK, credentials, fake_step

pytestmark = pytest.mark.runtime
__all__ = ["credentials"]  # a fixture


def test_start_returns_before_the_manifest_and_the_next_start_waits(
    credentials, s3_bucket, tmp_path, monkeypatch
):
    monkeypatch.setenv(FAULT_POINT_ENV, HOLD_POINT)  # each upload holds until waited for
    mirror = CheckpointMirror(f"s3://{s3_bucket}/run", ONE_RANK)
    uploads = AsyncUploads(mirror)
    uploads.start(fake_step(tmp_path, 1), 1)
    assert uploads.in_flight == 1
    assert mirror.manifest(1) is None  # held: this thread goes on while step 1 is in flight
    uploads.start(fake_step(tmp_path, 2), 2)  # waits for step 1 first: one in flight
    assert mirror.manifest(1) is not None
    assert uploads.in_flight == 2 and mirror.manifest(2) is None
    uploads.wait("the end")
    assert uploads.in_flight is None
    assert [s for s in mirror.steps() if mirror.manifest(s)] == [1, 2]


def test_a_failed_upload_is_raised_by_the_next_wait(credentials, s3_bucket, tmp_path):
    uploads = AsyncUploads(CheckpointMirror(f"s3://{s3_bucket}/run", ONE_RANK))
    uploads.start(tmp_path / "global_step_7", 7)  # not on this disk; start returns regardless
    with pytest.raises(StorageTransferError, match=r"uploading step 7 .* not on this rank.s disk"):
        uploads.wait("the run is ending")
    uploads.wait("again")  # reported once
