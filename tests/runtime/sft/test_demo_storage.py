"""The learning demo's storage is kept between `make demo` runs only while its inputs match."""

from __future__ import annotations

import pytest

from kuberl_runtime.demo_learning import prepare_cached, storage_paths

pytestmark = pytest.mark.runtime


def test_storage_is_reused_only_for_the_same_inputs(tmp_path):
    paths, reused = prepare_cached(tmp_path, seed=0)
    assert not reused and paths == storage_paths(tmp_path)
    weights = (paths["model"] / "model.safetensors").read_bytes()

    assert prepare_cached(tmp_path, seed=0) == (paths, True)

    (tmp_path / "storage.key").write_text("inputs of another version")
    assert prepare_cached(tmp_path, seed=0) == (paths, False)
    assert (paths["model"] / "model.safetensors").read_bytes() == weights  # a pure function

    paths["sft_train"].unlink()
    assert prepare_cached(tmp_path, seed=0) == (paths, False)
    _, reused = prepare_cached(tmp_path, seed=1)
    assert not reused
    assert (paths["model"] / "model.safetensors").read_bytes() != weights
