"""Two ranks over gloo train exactly like one rank on the same global batch."""

from __future__ import annotations

import pytest
import torch

from tests.runtime.trainer.conftest import (
    base_config,
    deterministic,
    read_metrics,
    read_weights,
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
    one, two = read_metrics(outputs[1]), read_metrics(outputs[2])
    assert sorted(one) == sorted(two) == [1, 2]
    for step in one:
        a, b = deterministic(one[step]), deterministic(two[step])
        assert a.keys() == b.keys()
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), (step, key)
    w1, w2 = read_weights(outputs[1] / "huggingface"), read_weights(outputs[2] / "huggingface")
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], atol=1e-5, rtol=1e-4)
