"""Honoured means read: setting any honoured key to another valid value changes the resolved plan.

The runtime reads only the plan (``kuberl train --plan``), so a key whose flip leaves the plan as
it was cannot change the run, whatever the registry says. For each honoured key of the PPO/GRPO
tree: resolve the base document (validation, then the operator's ``plan_validated``), set the
key to other values its type admits (``support/key_flips.py``), resolve again and compare the
plans (all of the plan but ``source``, the effective config kept for the record). A value may
mean what the base already does (``warmup_style: constant`` where it is unset), so the test
passes on the first valid value that changes the plan, and fails when none does.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberl_api.backend_config import BackendConfig
from kuberl_api.keys import REGISTRY, Fate
from support.key_flips import Flipper, changed, resolve

ROOT = Path(__file__).resolve().parents[3]
# examples/demo.yaml (GRPO, KL loss, HF rollout) in a ModelArts envelope, so that the envelope's
# keys (af_output_dir, engine_kwargs) are keys of the same document.
BASE = {
    "af_output_dir": "/outputs/demo",
    "backend_config": yaml.safe_load((ROOT / "examples/demo.yaml").read_text()),
}


def _deprecated(key: str, value: int) -> dict[str, Any]:
    """The deprecated global micro batch ``key`` at ``value``, its per-GPU replacement unset."""
    return {key + "_per_gpu": None, key: value}


A, R, REF = "actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", "actor_rollout_ref.ref."
M = "actor_rollout_ref.model."
CRITIC = {"algorithm.adv_estimator": "gae", "critic.ppo_micro_batch_size_per_gpu": 4}
DAPO = {
    "reward_model.reward_manager": "dapo",
    "reward_model.reward_kwargs.overlong_buffer_cfg.enable": True,
    "reward_model.reward_kwargs.overlong_buffer_cfg.len": 8,
    "reward_model.reward_kwargs.max_resp_len": 32,
}
COMPANIONS: dict[str, dict[str, Any]] = {
    # Set in both documents. A row is a key or the start of keys; the longest that fits holds.
    # 1. The key counts only with another setting: that setting is switched on.
    "critic.": CRITIC,  # the critic runs only with GAE, and then needs a micro batch
    "critic.optim.": {**CRITIC, "critic.optim.lr_scheduler_type": "cosine"},  # cosine keys too
    "critic.model.lora_": {**CRITIC, "critic.model.lora_rank": 8},  # LoRA settings need LoRA
    "critic.model.target_modules": {**CRITIC, "critic.model.lora_rank": 8},
    "critic.ppo_max_token_len_per_gpu": {**CRITIC, "critic.use_dynamic_bsz": True},
    "critic.forward_max_token_len_per_gpu": {**CRITIC, "critic.use_dynamic_bsz": True},
    "reward_model.": {"reward_model.enable": True, "reward_model.model.path": "/models/rm"},
    "reward_model.reward_kwargs.": DAPO,  # only the dapo manager reads them, buffer on
    "reward_model.reward_manager": {},  # dapo on its own is valid; the buffer stays off
    "custom_reward_function.": {"custom_reward_function.path": "/rewards/score.py"},
    "trainer.default_hdfs_dir": {"trainer.default_hdfs_dir": "s3://bucket/ckpt"},  # a URL
    M + "lora_": {M + "lora_rank": 8},
    M + "target_modules": {M + "lora_rank": 8},
    M + "exclude_modules": {M + "lora_rank": 8},
    R: {R + "name": "vllm"},  # the engine keys are read by the vLLM rollout
    R + "log_prob_max_token_len_per_gpu": {R + "log_prob_use_dynamic_bsz": True},
    REF + "log_prob_max_token_len_per_gpu": {REF + "log_prob_use_dynamic_bsz": True},
    A + "ppo_max_token_len_per_gpu": {A + "use_dynamic_bsz": True},
    A + "optim.lr_warmup_steps_ratio": {A + "optim.lr_warmup_steps": -1},  # steps win if > 0
    # the loss modes' parameters, each with the mode that reads it
    A + "policy_loss.clip_cov_": {A + "policy_loss.loss_mode": "clip_cov"},
    A + "policy_loss.kl_cov_ratio": {A + "policy_loss.loss_mode": "kl_cov"},
    A + "policy_loss.ppo_kl_coef": {A + "policy_loss.loss_mode": "kl_cov"},
    A + "policy_loss.dro_beta": {
        A + "policy_loss.loss_mode": "dro",
        A + "policy_loss.dro_beta": 0.5,  # required by dro
    },
    A + "tau_": {A + "policy_loss.loss_mode": "sapo"},
    "algorithm.gamma": CRITIC,  # GAE's
    "algorithm.lam": CRITIC,
    "algorithm.kl_": {"algorithm.use_kl_in_reward": True},  # kl_penalty, kl_ctrl.*
    "algorithm.difficulty_": {"algorithm.difficulty_mask": True},  # the mask's thresholds
    # ROLL forces group normalisation for grpo: the norm types count with another estimator.
    "algorithm.norm_mean_type": {"algorithm.adv_estimator": "reinforce_plus_plus"},
    "algorithm.norm_std_type": {"algorithm.adv_estimator": "reinforce_plus_plus"},
    "data.custom_cls.name": {"data.custom_cls.path": "/data/my_dataset.py"},
    # rollout correction: IS bounds count with IS on, rejection options with a threshold.
    "algorithm.rollout_correction.rollout_is_": {
        "algorithm.rollout_correction.rollout_is": "token"
    },
    "algorithm.rollout_correction.rollout_rs": {
        "algorithm.rollout_correction.rollout_rs_threshold": 2.0
    },
    "algorithm.rollout_correction.rollout_rs_threshold": {
        "algorithm.rollout_correction.rollout_rs": "token_k2",
        "algorithm.rollout_correction.rollout_rs_threshold": 1.0,
    },
    # DAPO's filter: its settings count once it is on (with a metric); gen_batch_size with it.
    "algorithm.filter_groups.": {
        "algorithm.filter_groups.enable": True,
        "algorithm.filter_groups.metric": "acc",
    },
    "data.gen_batch_size": {
        "algorithm.filter_groups.enable": True,
        "algorithm.filter_groups.metric": "acc",
    },
    "trainer.total_epochs": {"trainer.total_training_steps": None},  # steps win when set
    R + "agent.default_agent_loop": {R + "multi_turn.enable": True},  # tool_agent needs it
    "trainer.critic_warmup": CRITIC,
    "trainer.max_critic_ckpt_to_keep": CRITIC,
    "trainer.resume_from_path": {
        "trainer.resume_mode": "resume_path",
        "trainer.resume_from_path": "/ckpt/global_step_5",  # required in that mode
    },
    # 2. Another value is refused without the companion.
    "algorithm.adv_estimator": CRITIC,  # GAE builds a critic, which needs a micro batch
    "critic.enable": {"critic.ppo_micro_batch_size_per_gpu": 4},  # off by GRPO; GAE needs it on
    M + "lora_adapter_path": {M + "lora_rank": 8},
    A + "ulysses_sequence_parallel_size": {M + "use_remove_padding": True},  # packed sequences
    A + "fsdp_config.ulysses_sequence_parallel_size": {M + "use_remove_padding": True},
    R + "cudagraph_capture_sizes": {R + "cudagraph_capture_sizes": [8, 16]},  # ints, not a str
    A + "on_policy_shortcut": {A + "ppo_mini_batch_size": 8},  # one mini-batch: on-policy
    R + "val_kwargs.do_sample": {R + "val_kwargs.temperature": 1.0},  # sampling: temperature > 0
    "trainer.nnodes": {A + "ppo_micro_batch_size_per_gpu": 4},  # divides a rank's rows on 4
    # 3. Deprecated keys count only while their replacement is unset (both set: refused).
    A + "ppo_micro_batch_size": _deprecated(A + "ppo_micro_batch_size", 16),
    REF + "log_prob_micro_batch_size": _deprecated(REF + "log_prob_micro_batch_size", 16),
    R + "log_prob_micro_batch_size": _deprecated(R + "log_prob_micro_batch_size", 16),
    "critic.ppo_micro_batch_size": {**CRITIC, **_deprecated("critic.ppo_micro_batch_size", 8)},
    "critic.forward_micro_batch_size": CRITIC,
    A + "optim.warmup_style": {A + "optim.lr_scheduler_type": None},
    "critic.optim.warmup_style": {**CRITIC, "critic.optim.lr_scheduler_type": None},
}
OUTSIDE_PLAN: dict[str, str] = {
    # Honoured keys the runtime reads from somewhere other than the plan: none.
}
PLAN_COPIES_UNREAD = {
    # No-effect keys the plan still carries (into a section it shares with trained models).
    "actor_rollout_ref.ref.fsdp_config.seed": "FSDPPlan.seed of a frozen model: loaded, not built",
    "reward_model.model.fsdp_config.seed": "FSDPPlan.seed of a frozen model: loaded, not built",
}
HONOURED = [e for e in REGISTRY.values() if e.fate is Fate.HONOURED]
NO_EFFECT = [e for e in REGISTRY.values() if e.fate is Fate.NO_EFFECT]


RL = Flipper(BASE, BackendConfig, REGISTRY, COMPANIONS)


@pytest.mark.parametrize(
    "entry",
    [e for e in HONOURED if e.key not in OUTSIDE_PLAN],
    ids=lambda e: e.key,
)
def test_flipping_an_honoured_key_changes_the_plan(entry):
    valid, changed, refusals = RL.flip(entry)
    assert valid, f"{entry.key}: no other value validates: {refusals}"
    assert changed, (
        f"{entry.key} = any of {valid!r} leaves the plan unchanged: the runtime cannot see it. "
        "Put the decision in the plan, or register the key no_effect (with the reason) or refused."
    )


@pytest.mark.parametrize(
    "entry", [e for e in NO_EFFECT if e.key not in PLAN_COPIES_UNREAD], ids=lambda e: e.key
)
def test_flipping_a_no_effect_key_leaves_the_plan_as_it_was(entry):
    valid, changed, _ = RL.flip(entry)
    assert not changed, (
        f"{entry.key} = {valid[-1]!r} changes the plan ({changed}): register it honoured, "
        "or leave it out of the plan"
    )


@pytest.mark.parametrize("key", sorted(PLAN_COPIES_UNREAD))
def test_the_plan_copies_unread_are_still_copied(key):
    assert REGISTRY[key].fate is Fate.NO_EFFECT
    assert RL.flip(REGISTRY[key])[1], f"{key} is out of the plan now: drop it from the list"


@pytest.mark.parametrize("key", [A + "optim.optimizer", "critic.optim.optimizer"])
def test_an_optimizer_verl_cannot_build_from_torch_is_refused_by_name(key):
    """verl 0.9.1 builds optim.optimizer from torch.optim with lr and weight_decay: LBFGS takes
    no weight_decay; the error names the key, the value and the accepted classes."""
    plan, _, errors = resolve(RL.document({**CRITIC, key: "LBFGS"}))
    assert plan is None
    assert any(key in e and "LBFGS" in e and "AdamW" in e and "SGD" in e for e in errors), errors


def test_the_lists_name_honoured_keys_and_every_companion_is_valid():
    for key in [*OUTSIDE_PLAN, *(r for r in COMPANIONS if r in REGISTRY)]:
        assert REGISTRY[key].fate is Fate.HONOURED, key
    for row in COMPANIONS:
        assert any(e.key.startswith(row) for e in HONOURED), f"{row} prefixes no honoured key"
    for settings in COMPANIONS.values():
        assert resolve(RL.document(settings))[0] is not None, settings


def test_writing_one_critic_optim_key_keeps_verls_critic_lr():
    """The critic's optimizer defaults to lr 1e-5 (verl's), whether its subtree is written or not:
    a flip of critic.optim.weight_decay once changed critic.optim.lr too (to the actor's 1e-6)."""
    base, _ = RL.base_plan(CRITIC)
    written, _, errors = resolve(RL.document({**CRITIC, "critic.optim.weight_decay": 0.0}))
    assert written is not None, errors
    assert base["critic"]["optim"]["lr"] == written["critic"]["optim"]["lr"] == 1e-5
    assert changed(base, written) == ["critic.optim.weight_decay"]


@pytest.mark.parametrize(
    ("settings", "norm"),
    [
        ({"algorithm.reward_clip": 5.0}, ("group", "group")),  # grpo: ROLL's group/group
        ({"algorithm.norm_mean_type": "batch"}, ("group", "group")),
        ({"algorithm.difficulty_low_threshold": 0.2}, ("none", "none")),  # no mask: off
    ],
)
def test_the_plan_holds_rolls_normalisation_as_the_runtime_applies_it(settings, norm):
    plan, _, errors = resolve(RL.document(settings))
    assert plan is not None, errors
    roll = plan["algorithm"]["roll_rlvr"]
    assert (roll["norm_mean_type"], roll["norm_std_type"]) == norm
    assert roll["difficulty_low_threshold"] == 0.0
