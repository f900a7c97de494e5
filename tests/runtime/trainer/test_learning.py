"""The loop learns: a random tiny model is rewarded for writing digits and starts writing them."""

from __future__ import annotations

import pytest

from tests.runtime.trainer.conftest import base_config, read_metrics, run_train, set_key

pytestmark = pytest.mark.runtime


def learning_config(model_dir, out_dir, adv_estimator: str) -> dict:
    config = base_config(model_dir, out_dir, total_training_steps=20, n_gpus_per_node=2)
    set_key(config, "data.train_batch_size", 8)
    set_key(config, "data.max_response_length", 8)
    set_key(config, "actor_rollout_ref.rollout.n", 4)
    set_key(config, "actor_rollout_ref.actor.ppo_mini_batch_size", 8)
    set_key(config, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 16)
    set_key(config, "actor_rollout_ref.actor.optim.lr", 1e-2)
    set_key(config, "actor_rollout_ref.actor.use_kl_loss", False)
    set_key(config, "algorithm.adv_estimator", adv_estimator)
    return config


def test_grpo_raises_reward(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    result = run_train(learning_config(tiny_model_dir, out, "grpo"), tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    scores = [m["critic/score/mean"] for _, m in sorted(read_metrics(out).items())]
    start, end = sum(scores[:3]) / 3, sum(scores[-3:]) / 3
    assert start < 0.1
    assert end > 0.5, scores


def test_ppo_with_gae_raises_reward_and_fits_values(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    config = learning_config(tiny_model_dir, out, "gae")
    set_key(config, "trainer.total_training_steps", 24)
    set_key(config, "algorithm.lam", 0.95)
    set_key(config, "critic.optim.lr", 1e-2)
    set_key(config, "critic.ppo_micro_batch_size_per_gpu", 16)
    set_key(config, "critic.model.use_remove_padding", True)
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [m for _, m in sorted(read_metrics(out).items())]
    scores = [m["critic/score/mean"] for m in steps]
    vf_losses = [m["critic/vf_loss"] for m in steps]
    assert sum(scores[-3:]) / 3 > sum(scores[:3]) / 3 + 0.2, scores
    assert sum(vf_losses[-3:]) / 3 < sum(vf_losses[:3]) / 3 / 2, vf_losses
