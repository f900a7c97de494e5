"""`fsdp_config.fsdp_size` (HSDP): two CPU ranks with fsdp_size 1 (each rank holds the whole
model, gradients all-reduced across the two replicas) train like fsdp_size 2 (sharded over both
ranks): GAE with a KL loss, so the actor (and its reference) and the critic (its own fsdp_size)
all run on the hybrid mesh; the runtime logs the layout it built. The fsdp_size 2 side is the
session's shared GAE run (tests/runtime/conftest.py).
"""

from __future__ import annotations

import pytest

from tests.runtime.conftest import GAE_STEPS, gae_config
from tests.runtime.trainer.conftest import assert_same_training, run_train, set_key

pytestmark = pytest.mark.runtime

HYBRID = "hybrid sharding (fsdp_size 1): 2 replica group(s) x 1 shard(s)"


def test_replicated_ranks_train_like_sharded_ranks(tiny_model_dir, gae_run, tmp_path):
    out = tmp_path / "fsdp1"
    config = gae_config(tiny_model_dir, out)
    set_key(config, "actor_rollout_ref.actor.fsdp_config.fsdp_size", 1)
    set_key(config, "critic.model.fsdp_config.fsdp_size", 1)
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert HYBRID in result.stderr, result.stderr[-3000:]
    assert HYBRID not in gae_run.log, gae_run.log[-3000:]
    assert_same_training(out, gae_run.out, list(range(1, GAE_STEPS + 1)))
