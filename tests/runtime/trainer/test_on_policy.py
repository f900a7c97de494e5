"""actor.on_policy_shortcut: an exactly on-policy step without the old-log-prob forward.

One epoch over one mini-batch: π_old equals the policy the update starts from, so the update's
own log-prob (detached) stands in for the recomputed one and its entropy gives `actor/entropy`.
A step's losses, metrics and the trained weights equal the default path's to fp32 tolerance,
and the old-log-prob pass is not executed (its forwards are counted). verl 0.9.1 always
recomputes π_old, so the shortcut is off by default and refused where it would not hold.
"""

from __future__ import annotations

import math

import pytest
import torch

from kuberl_api.validation import SpecInvalid
from kuberl_runtime.config import run_config_from_dict
from kuberl_runtime.engine import actor as actor_module
from kuberl_runtime.launcher.worker import run_worker

from .conftest import base_config, deterministic, read_metrics, read_weights, run_train, set_key

pytestmark = pytest.mark.runtime

FORWARD = actor_module.forward_responses
ON_POLICY = {
    "actor_rollout_ref.actor.ppo_mini_batch_size": 4,  # = data.train_batch_size: one mini-batch
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 2,  # 4 micro-batches of 8 rows
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 4,
    "trainer.total_training_steps": 1,
}


def on_policy_config(model_dir, out, shortcut: bool, **trainer):
    config = base_config(model_dir, out, **trainer)
    for key, value in ON_POLICY.items():
        set_key(config, key, value)
    set_key(config, "actor_rollout_ref.actor.on_policy_shortcut", shortcut)
    return config


def train_in_process(config, monkeypatch) -> dict[str, int]:
    """One rank in this process; counts the actor's forwards with and without grad."""
    counts = {"grad": 0, "no_grad": 0}

    def counted(*args, **kwargs):
        counts["grad" if torch.is_grad_enabled() else "no_grad"] += 1
        return FORWARD(*args, **kwargs)

    monkeypatch.setattr(actor_module, "forward_responses", counted)
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    try:
        run_worker(run_config_from_dict(config))
    finally:
        torch.set_num_threads(threads)
    return counts


def assert_close_metrics(got: dict[str, float], want: dict[str, float]) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert math.isclose(got[key], value, rel_tol=1e-4, abs_tol=1e-6), (key, got[key], value)


def test_on_policy_step_equals_the_recomputed_one_without_its_forward(
    tiny_model_dir, tmp_path, monkeypatch
):
    runs = {}
    for shortcut in (False, True):
        out = tmp_path / f"shortcut-{shortcut}"
        counts = train_in_process(on_policy_config(tiny_model_dir, out, shortcut), monkeypatch)
        runs[shortcut] = counts, read_metrics(out)[1], read_weights(out / "huggingface")
    (base_counts, base, base_weights), (counts, got, weights) = runs[False], runs[True]
    # 8 rows: old log-probs in 2 micro-batches of 4, the reference in 1 of 8, update in 4 of 2.
    assert base_counts == {"grad": 4, "no_grad": 3}
    assert counts == {"grad": 4, "no_grad": 1}  # the reference pass only
    assert "timing_s/old_log_prob" in base and "timing_s/old_log_prob" not in got
    assert_close_metrics(deterministic(got), deterministic(base))
    assert got["actor/ppo_kl"] == 0.0 and got["actor/pg_clipfrac"] == 0.0
    for name, tensor in base_weights.items():
        # Adam at lr 1e-3 turns fp32 noise in a near-zero gradient into ~1e-6 of a step.
        torch.testing.assert_close(weights[name], tensor, rtol=1e-4, atol=1e-5)


def test_two_ranks_gather_the_entropy_of_every_row(tiny_model_dir, tmp_path):
    steps = {}
    for shortcut in (False, True):
        out = tmp_path / f"shortcut-{shortcut}"
        config = on_policy_config(tiny_model_dir, out, shortcut, n_gpus_per_node=2)
        result = run_train(config, tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        steps[shortcut] = read_metrics(out)[1]
    assert_close_metrics(deterministic(steps[True]), deterministic(steps[False]))


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("actor_rollout_ref.actor.ppo_epochs", 2, "ppo_epochs is 2"),
        ("actor_rollout_ref.actor.ppo_mini_batch_size", 2, "ppo_mini_batch_size 2 <"),
        ("algorithm.use_kl_in_reward", True, "use_kl_in_reward"),
    ],
)
def test_the_shortcut_is_refused_where_the_update_is_not_on_policy(
    tiny_model_dir, tmp_path, key, value, reason
):
    config = on_policy_config(tiny_model_dir, tmp_path, True)
    set_key(config, key, value)
    with pytest.raises(SpecInvalid) as err:
        run_config_from_dict(config)
    rendered = "\n".join(p.render() for p in err.value.problems)
    assert "on_policy_shortcut" in rendered and reason in rendered


def test_off_by_default(tiny_model_dir, tmp_path):
    plan = run_config_from_dict(base_config(tiny_model_dir, tmp_path)).plan
    assert plan.actor.on_policy_shortcut is False
