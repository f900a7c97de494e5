"""Atomic step directories, the tracker, retention and recovery from interrupted writes."""

from __future__ import annotations

import pytest
import torch

from kuberl_runtime.checkpoint.contents import CheckpointContentsError, Contents
from kuberl_runtime.checkpoint.manager import TRACKER_FILE, CheckpointManager, TrainState
from kuberl_runtime.testing.train_state import tiny_actor
from tests.runtime.checkpoint.conftest import MAIN


def make_state(seed: int) -> TrainState:
    return TrainState({"actor": tiny_actor(seed)}, {"rng": seed}, {"sampler": {"epoch": seed}})


def test_save_then_load_restores_model_optimizer_and_extras(tmp_path, manager):
    saved = make_state(1)
    path = manager.save(3, saved)
    assert path == tmp_path / "global_step_3"
    assert (tmp_path / TRACKER_FILE).read_text().strip() == "3"
    restored = make_state(2)
    manager.load(path, restored)
    (model, optimizer), (ref_model, ref_optimizer) = (
        restored.modules["actor"],
        saved.modules["actor"],
    )
    for a, b in zip(model.parameters(), ref_model.parameters(), strict=True):
        assert torch.equal(a, b)
    state, ref_state = optimizer.state_dict()["state"], ref_optimizer.state_dict()["state"]
    assert torch.equal(state[0]["exp_avg"], ref_state[0]["exp_avg"])
    assert restored.extra == {"rng": 1} and restored.data == {"sampler": {"epoch": 1}}


def test_retention_removes_whole_old_steps_never_the_newest(tmp_path):
    manager = CheckpointManager(tmp_path, MAIN, max_to_keep=2)
    for step in (1, 2, 3, 4):
        manager.save(step, make_state(step))
    assert manager.complete_steps() == [3, 4]
    single = CheckpointManager(tmp_path, MAIN, max_to_keep=1)
    single.save(5, make_state(5))
    assert single.complete_steps() == [5]


def test_interrupted_write_is_ignored_and_cleaned_up(tmp_path, monkeypatch, manager):
    manager.save(1, make_state(1))

    def crash(*_args, **_kwargs):
        raise RuntimeError("node lost")

    monkeypatch.setattr("kuberl_runtime.checkpoint.manager.os.replace", crash)
    with pytest.raises(RuntimeError):
        manager.save(2, make_state(2))
    monkeypatch.undo()
    assert (tmp_path / ".tmp-global_step_2").is_dir()
    assert manager.latest_step() == 1
    manager.remove_partial_writes()
    assert not (tmp_path / ".tmp-global_step_2").exists()
    manager.load(manager.step_dir(1), make_state(9))


def test_latest_step_falls_back_to_newest_complete_directory(tmp_path, manager):
    assert manager.latest_step() is None
    manager.save(2, make_state(2))
    (tmp_path / TRACKER_FILE).write_text("7\n")  # points at a step that is gone
    assert manager.latest_step() == 2
    (tmp_path / TRACKER_FILE).unlink()
    assert manager.latest_step() == 2


def _params(state: TrainState) -> list[torch.Tensor]:
    return [p.detach().clone() for p in state.modules["actor"][0].parameters()]


def _exp_avg(state: TrainState) -> torch.Tensor:
    return state.modules["actor"][1].state_dict()["state"][0]["exp_avg"].clone()


def test_save_contents_model_only_writes_no_optimizer_or_extra(tmp_path):
    only_model = {"actor": Contents(save=("model",), load=("model",))}
    manager = CheckpointManager(tmp_path, MAIN, contents=only_model)
    saved = make_state(1)
    path = manager.save(1, saved)
    assert not list(path.glob("extra_state_rank_*.pt"))
    restored = make_state(2)
    optimizer_before = _exp_avg(restored)
    manager.load(path, restored)
    assert all(torch.equal(a, b) for a, b in zip(_params(restored), _params(saved), strict=True))
    # Not loaded: the optimizer keeps its own state, extra stays empty; data is always loaded.
    assert torch.equal(_exp_avg(restored), optimizer_before)
    assert restored.extra == {} and restored.data == {"sampler": {"epoch": 1}}
    # Asking for the optimizer from a model-only step names both settings.
    wants_all = CheckpointManager(tmp_path, MAIN)
    with pytest.raises(CheckpointContentsError, match="load_contents asks for"):
        wants_all.load(path, make_state(3))


def test_load_contents_model_is_a_warm_start_without_the_optimizer(tmp_path, manager):
    saved = make_state(1)
    path = manager.save(1, saved)
    warm = {"actor": Contents(load=("model",))}
    restored = make_state(2)
    optimizer_before = _exp_avg(restored)
    CheckpointManager(tmp_path, MAIN, contents=warm).load(path, restored)
    assert all(torch.equal(a, b) for a, b in zip(_params(restored), _params(saved), strict=True))
    assert torch.equal(_exp_avg(restored), optimizer_before)
    assert not torch.equal(optimizer_before, _exp_avg(saved))
    assert restored.extra == {}
