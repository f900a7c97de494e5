"""Two ranks over gloo train exactly like one rank on the same global batch."""

from __future__ import annotations

import pytest

from tests.runtime.trainer.conftest import (
    assert_same_training,
    base_config,
    run_train,
    set_key,
)

pytestmark = pytest.mark.runtime


def test_two_ranks_match_one_rank(tiny_model_dir, tmp_path):
    outputs = {}
    for world in (1, 2):
        out = tmp_path / f"world{world}"
        config = base_config(tiny_model_dir, out, total_training_steps=2, n_gpus_per_node=world)
        # Two mini-batches a step, two micro-batches each on one rank: real accumulation.
        set_key(config, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 1)
        # verl's balance_batch regroups rows per DP rank, so mini-batches depend on the world size.
        set_key(config, "trainer.balance_batch", False)
        result = run_train(config, tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        outputs[world] = out
    assert_same_training(outputs[1], outputs[2], [1, 2])
