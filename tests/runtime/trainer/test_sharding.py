"""Two ranks over gloo train exactly like one rank on the same global batch."""

from __future__ import annotations

import pytest

from tests.runtime.conftest import two_rank_config
from tests.runtime.trainer.conftest import assert_same_training, run_train, set_key

pytestmark = pytest.mark.runtime


def test_two_ranks_match_one_rank(tiny_model_dir, two_rank_run, tmp_path):
    # Two mini-batches a step, two micro-batches each on one rank: real accumulation; the two
    # ranks' side is the session's shared run of the same config (tests/runtime/conftest.py).
    out = tmp_path / "world1"
    config = two_rank_config(tiny_model_dir, out)
    set_key(config, "trainer.n_gpus_per_node", 1)
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_training(out, two_rank_run.out, [1, 2])
