"""`engine.ulysses_sequence_parallel_size` in an SFT config: honoured (the runtime builds the
(dp, sp) mesh from the plan), planned as dp = world / sp, refused when the world does not split
into SP groups, and the global batch splits over the data-parallel ranks only."""

from __future__ import annotations

from typing import Any

import pytest

from kuberl_api.keys import Fate
from kuberl_api.keys.sft import SFT_REGISTRY
from kuberl_api.plan.sft import build_sft_plan
from kuberl_api.validation import parse_document, validate_document

KEY = "engine.ulysses_sequence_parallel_size"


def _sft(sp: int, batch: int = 8, gpus: int = 4) -> dict[str, Any]:
    return {
        "data": {"train_files": "/d/train.parquet", "train_batch_size": batch},
        "model": {"path": "/m"},
        "engine": {"ulysses_sequence_parallel_size": sp},
        "trainer": {"nnodes": 1, "n_gpus_per_node": gpus, "logger": "console"},
    }


def test_the_key_is_honoured_by_the_sft_runtime():
    entry = SFT_REGISTRY[KEY]
    assert entry.fate is Fate.HONOURED
    assert entry.where == "runtime/kuberl_runtime/sft/components.py"


@pytest.mark.parametrize(("sp", "dp"), [(1, 4), (2, 2), (4, 1)])
def test_the_plan_splits_the_world_into_dp_x_sp(sp, dp):
    result = validate_document(parse_document(_sft(sp)))
    assert result.ok, [p.render() for p in result.errors]
    assert KEY not in " ".join(result.not_honoured)
    assert result.sft_config is not None
    placement = build_sft_plan(result.sft_config).placement
    assert (placement.dp_size, placement.sp_size, placement.world_size) == (dp, sp, 4)


def test_a_world_sp_does_not_divide_is_refused():
    result = validate_document(parse_document(_sft(3)))
    (problem,) = result.errors
    assert problem.path == KEY and problem.value == 3
    assert "world size 4" in problem.render() and "divisor" in problem.render()


def test_the_batch_splits_over_the_data_parallel_ranks_only():
    # 2 rows over dp 1 x sp 4 ranks: every rank of the one SP group holds both.
    assert validate_document(parse_document(_sft(4, batch=2))).ok
    result = validate_document(parse_document(_sft(2, batch=3)))
    (problem,) = result.errors
    assert problem.path == "data.train_batch_size" and "multiple of the 2 ranks" in problem.hint
