"""`fsdp_config.fsdp_size` (HSDP): two CPU ranks with fsdp_size 1 (each rank holds the whole
model, gradients all-reduced across the two replicas) train like fsdp_size 2 (sharded over both
ranks): GAE with a KL loss, so the actor (and its reference) and the critic (its own fsdp_size)
all run on the hybrid mesh; the runtime logs the layout it built.
"""

from __future__ import annotations

import pytest

from tests.runtime.trainer.conftest import (
    assert_same_training,
    base_config,
    run_train,
    set_key,
)

pytestmark = pytest.mark.runtime


def test_replicated_ranks_train_like_sharded_ranks(tiny_model_dir, tmp_path):
    outputs = {}
    for fsdp_size in (1, 2):
        out = tmp_path / f"fsdp{fsdp_size}"
        config = base_config(tiny_model_dir, out, total_training_steps=2, n_gpus_per_node=2)
        set_key(config, "actor_rollout_ref.actor.fsdp_config.fsdp_size", fsdp_size)
        set_key(config, "critic.model.fsdp_config.fsdp_size", fsdp_size)
        set_key(config, "algorithm.adv_estimator", "gae")
        set_key(config, "critic.optim.lr", 1e-3)
        set_key(config, "critic.ppo_micro_batch_size_per_gpu", 2)
        set_key(config, "critic.forward_micro_batch_size_per_gpu", 4)
        result = run_train(config, tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        hybrid = "hybrid sharding (fsdp_size 1): 2 replica group(s) x 1 shard(s)"
        assert (hybrid in result.stderr) == (fsdp_size == 1), result.stderr[-3000:]
        outputs[fsdp_size] = out
    assert_same_training(outputs[1], outputs[2], [1, 2])
