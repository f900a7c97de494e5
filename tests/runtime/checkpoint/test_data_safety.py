"""A checkpoint counts only when complete, is durable before anything points at it, is read
without unpickling code, and one output directory belongs to one job."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch

from kuberl_runtime.checkpoint.manager import (
    COMPLETE_FILE,
    TRACKER_FILE,
    CheckpointManager,
    IncompleteCheckpoint,
    TrainState,
)
from kuberl_runtime.checkpoint.owner import (
    OWNER_FILE,
    OutputDirOwned,
    claim_output_dir,
    read_owner,
    run_owner,
)
from kuberl_runtime.testing.train_state import tiny_actor
from kuberl_runtime.trainer.state import capture_rng, restore_rng
from tests.runtime.checkpoint.conftest import MAIN


def make_state(seed: int) -> TrainState:
    actor = tiny_actor(seed)  # before the RNG's capture: its draws are part of the state
    return TrainState({"actor": actor}, {"rng": capture_rng()}, {"step": seed})


def test_a_step_without_its_completion_mark_is_not_a_checkpoint(tmp_path, manager):
    manager.save(1, make_state(1))
    manager.save(2, make_state(2))
    (tmp_path / "global_step_2" / COMPLETE_FILE).unlink()  # e.g. a copy cut short
    assert manager.complete_steps() == [1]
    assert manager.latest_step() == 1  # the tracker says 2; 2 is not complete
    with pytest.raises(IncompleteCheckpoint, match=f"global_step_2 has no {COMPLETE_FILE}"):
        manager.load(tmp_path / "global_step_2", make_state(3))


class _Payload:
    """Unpickling this runs code: what a planted checkpoint file would do."""

    def __reduce__(self):
        return (os.mkdir, (str(Path(os.environ["PLANTED_DIR"])),))


def test_loading_never_runs_code_planted_in_a_checkpoint(tmp_path, monkeypatch):
    manager = CheckpointManager(tmp_path / "ckpt", MAIN)
    step_dir = manager.save(1, make_state(1))
    planted = tmp_path / "code-ran"
    monkeypatch.setenv("PLANTED_DIR", str(planted))
    torch.save({"step": 1, "evil": _Payload()}, step_dir / "data.pt")
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        manager.load(step_dir, make_state(2))
    assert not planted.exists()


def test_rng_state_round_trips_through_a_weights_only_checkpoint(manager):
    torch.manual_seed(7)
    import numpy as np

    np.random.seed(7)
    step_dir = manager.save(1, make_state(1))
    expected = (torch.rand(3), np.random.rand(3))
    loaded = make_state(5)
    manager.load(step_dir, loaded)
    restore_rng(loaded.extra["rng"])
    assert torch.equal(torch.rand(3), expected[0])
    assert np.array_equal(np.random.rand(3), expected[1])


def test_every_file_is_fsynced_before_the_renames_that_publish_it(tmp_path, monkeypatch, manager):
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append(("replace", f"{src} -> {dst}"))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    manager.save(3, make_state(3))
    monkeypatch.undo()

    tmp, final = tmp_path / ".tmp-global_step_3", tmp_path / "global_step_3"
    publish = events.index(("replace", f"{tmp} -> {final}"))
    fsynced_before = {path for kind, path in events[:publish] if kind == "fsync"}
    written = [p for p in final.rglob("*")]
    assert written and (final / COMPLETE_FILE).is_file()
    for path in [final, *written]:
        before = str(tmp / path.relative_to(final))
        # the completion mark is written to a .tmp name, fsynced, then renamed
        assert {before, before + ".tmp"} & fsynced_before, path
    assert ("fsync", str(tmp_path)) in events[publish:]  # the rename itself made durable
    tracker = tmp_path / TRACKER_FILE
    tracker_rename = events.index(("replace", f"{tracker}.tmp -> {tracker}"))
    assert publish < tracker_rename
    assert ("fsync", f"{tracker}.tmp") in events[publish:tracker_rename]


def test_a_second_owner_is_refused_naming_the_directory_and_the_owner(tmp_path):
    first = run_owner({"KUBERL_JOB_UID": "u-1", "KUBERL_JOB_NAME": "a",
                       "KUBERL_JOB_NAMESPACE": "ns"}, "p", "e")  # fmt: skip
    claim_output_dir(tmp_path, first, MAIN)
    claim_output_dir(tmp_path, first, MAIN)  # the same job's next attempt
    assert read_owner(tmp_path) == "job:u-1 (ns/a)"
    second = run_owner({"KUBERL_JOB_UID": "u-2"}, "p", "e")
    with pytest.raises(OutputDirOwned) as refused:
        claim_output_dir(tmp_path, second, MAIN)
    message = str(refused.value)
    assert f"af_output_dir {tmp_path} belongs to job:u-1 (ns/a)" in message
    assert str(tmp_path / OWNER_FILE) in message and "job:u-2" in message


def test_local_runs_are_owned_by_their_project_and_experiment(tmp_path):
    assert run_owner({}, "proj", "exp") == "local:proj/exp"
    claim_output_dir(tmp_path, run_owner({}, "proj", "exp"), MAIN)
    with pytest.raises(OutputDirOwned, match="belongs to local:proj/exp"):
        claim_output_dir(tmp_path, run_owner({}, "proj", "other"), MAIN)


def test_a_claim_cut_short_before_its_owner_was_written_is_taken_over(tmp_path):
    (tmp_path / OWNER_FILE).write_text("")
    claim_output_dir(tmp_path, "local:p/e", MAIN)
    assert read_owner(tmp_path) == "local:p/e"
