"""A ROLL pipeline config → a verl ``backend_config`` tree, plus every problem on the way.

Steps: known-but-unsupported keys out (``unsupported``), DeepSpeed presets in, ``${...}``
resolved, typed validation (``models``), then the mapping below. The result is a plain dict
that the usual backend_config validation takes from there.
"""

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from kuberl_api.roll.batch import map_train_batch
from kuberl_api.roll.draft import Draft
from kuberl_api.roll.model_args import map_freeze, map_sequence_parallel
from kuberl_api.roll.models import RollConfig
from kuberl_api.roll.placement import map_placement
from kuberl_api.roll.rewards import map_rewards
from kuberl_api.roll.strategy import (
    map_infer_strategy,
    map_reference_strategy,
    map_train_strategy,
)
from kuberl_api.roll.unsupported import take_all_known_keys
from kuberl_api.roll.variables import drop_variables
from kuberl_api.roll.workers import map_data, map_generation, map_models, map_training_args
from kuberl_api.validation.interpolation import resolve_interpolations
from kuberl_api.validation.problems import Problem
from kuberl_api.validation.schema_errors import problems_from_validation_error

_PRESET = re.compile(r"^\$\{\s*deepspeed_zero(\d)?(_cpuoffload)?\s*\}$")
_TRACKERS = {
    "stdout": ["console"],
    "tensorboard": ["console", "tensorboard"],
    "wandb": ["console", "wandb"],
    "swanlab": ["console", "swanlab"],
}
_ESTIMATORS = {"gae": "gae", "grpo": "grpo", "reinforce": "reinforce_plus_plus"}
ROLL_MARKERS = ("actor_train", "actor_infer")


@dataclass
class RollTranslation:
    backend_config: dict[str, Any] | None
    """The verl tree, or None when the ROLL config has errors."""
    problems: list[Problem] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)
    """verl dotted path -> the ROLL key it came from."""


def looks_like_roll(raw: dict) -> bool:
    return any(key in raw for key in ROLL_MARKERS)


def translate_roll_config(
    raw: dict[str, Any], prefix: str = "", world_size: int | None = None
) -> RollTranslation:
    """``world_size`` is the job's device count when placement decides it (a manifest's pools)."""
    body, problems = take_all_known_keys(_apply_presets(raw), prefix)
    resolved, found = resolve_interpolations(body, prefix)
    problems += found
    body = drop_variables(resolved, body) if isinstance(resolved, dict) else resolved
    if any(p.is_error for p in problems):
        return RollTranslation(None, problems)
    try:
        cfg = RollConfig.model_validate(body)
    except ValidationError as err:
        return RollTranslation(
            None, problems + problems_from_validation_error(err, RollConfig, prefix)
        )
    draft = Draft(prefix)
    draft.problems = problems
    map_roll_config(cfg, draft, world_size)
    ok = not any(p.is_error for p in draft.problems)
    return RollTranslation(draft.tree if ok else None, draft.problems, draft.origins)


def map_roll_config(cfg: RollConfig, draft: Draft, world_size: int | None) -> None:
    world = map_placement(cfg, draft)
    if cfg.actor_train.device_mapping is None:
        world = world_size or 1
        if world_size is None:
            draft.error(
                ("actor_train", "device_mapping"),
                "required: kuberl sizes the job from actor_train's devices",
                "add e.g. device_mapping: list(range(0,8))",
            )
    _map_pipeline(cfg, draft)
    _map_algorithm(cfg, draft)
    map_models(cfg, draft)
    map_data(cfg, draft)
    map_generation(cfg, draft)
    map_training_args(cfg, draft)
    map_train_strategy(cfg.actor_train, draft, "actor_train", "actor_rollout_ref.actor", world)
    map_infer_strategy(cfg.actor_infer, draft)
    if cfg.reference is not None:
        map_reference_strategy(cfg.reference, draft, world)
    map_sequence_parallel(cfg, draft)
    map_freeze(cfg, draft)
    micro = map_train_batch(cfg, draft, "actor_train", world, "actor_rollout_ref.actor")
    _map_forward_batches(cfg, draft, micro)
    if cfg.critic is not None:
        map_train_strategy(cfg.critic, draft, "critic", "critic", world)
        critic_micro = map_train_batch(cfg, draft, "critic", world, "critic")
        infer = cfg.critic.infer_batch_size or critic_micro
        if infer:
            draft.set(
                "critic.forward_micro_batch_size_per_gpu", infer, "critic", "infer_batch_size"
            )


def _map_pipeline(cfg: RollConfig, draft: Draft) -> None:
    draft.set("data.train_batch_size", cfg.rollout_batch_size, "rollout_batch_size")
    draft.set("data.max_prompt_length", cfg.prompt_length, "prompt_length")
    draft.set("data.max_response_length", cfg.response_length, "response_length")
    draft.set(
        "actor_rollout_ref.rollout.n",
        cfg.num_return_sequences_in_group,
        "num_return_sequences_in_group",
    )
    optional = {
        "exp_name": "trainer.experiment_name",
        "seed": "trainer.seed",
        "output_dir": "trainer.default_local_dir",
        "max_steps": "trainer.total_training_steps",
        "save_steps": "trainer.save_freq",
        "eval_steps": "trainer.test_freq",
    }
    for roll_key, verl_key in optional.items():
        value = getattr(cfg, roll_key)
        if value is not None:
            draft.set(verl_key, value, roll_key)
    if cfg.max_steps is not None:
        # ROLL runs max_steps however many passes over the data that takes.
        draft.set("trainer.total_epochs", 1_000_000, "max_steps")
    if cfg.track_with in _TRACKERS:
        draft.set("trainer.logger", _TRACKERS[cfg.track_with], "track_with")
    elif cfg.track_with is not None:
        draft.error(
            ("track_with",),
            "kuberl logs to the console, TensorBoard, Weights & Biases and SwanLab only "
            "(ml_tracker is Alibaba's internal tracker)",
            f"use one of {', '.join(_TRACKERS)}",
            cfg.track_with,
        )
    _map_resume(cfg, draft)
    if cfg.logging_steps not in (None, 1):
        draft.warn(
            ("logging_steps",),
            "kuberl logs metrics every step; logging_steps is approximated by 1",
            "remove it or set 1",
            cfg.logging_steps,
        )
    map_rewards(cfg, draft)
    if cfg.val_batch_size is not None:
        draft.warn(
            ("val_batch_size",),
            "ignored: kuberl validates the whole validation set as one batch (verl)",
            "remove it",
            cfg.val_batch_size,
        )


def _map_resume(cfg: RollConfig, draft: Draft) -> None:
    value = cfg.resume_from_checkpoint
    if value is None:
        return
    if isinstance(value, str):
        draft.set("trainer.resume_mode", "resume_path", "resume_from_checkpoint")
        draft.set("trainer.resume_from_path", value, "resume_from_checkpoint")
    else:
        draft.set("trainer.resume_mode", "auto" if value else "disable", "resume_from_checkpoint")


def _map_algorithm(cfg: RollConfig, draft: Draft) -> None:
    estimator = _ESTIMATORS[cfg.adv_estimator]
    draft.set("algorithm.adv_estimator", estimator, "adv_estimator")
    if cfg.adv_estimator == "reinforce" and not cfg.whiten_advantages:
        # With whiten_advantages, ROLL's reinforce (discounted returns, whitened over the kept
        # responses) is reinforce_plus_plus on single-turn responses; without, it is not.
        draft.warn(
            ("adv_estimator",),
            "ROLL's reinforce is approximated by verl's reinforce_plus_plus (discounted "
            "returns, whitened over the batch)",
            "set whiten_advantages: true for an exact mapping",
            "reinforce",
        )
    whitens = cfg.adv_estimator in ("gae", "reinforce")
    if cfg.whiten_advantages != whitens:
        draft.warn(
            ("whiten_advantages",),
            f"kuberl {'always' if whitens else 'never'} whitens {cfg.adv_estimator} advantages "
            "over the batch (verl); this setting is approximated",
            f"set whiten_advantages: {str(whitens).lower()} to silence this",
            cfg.whiten_advantages,
        )
    sets = {
        "algorithm.gamma": (cfg.gamma, "gamma"),
        "algorithm.lam": (cfg.lambd, "lambd"),
        "algorithm.kl_penalty": (cfg.kl_penalty, "kl_penalty"),
        "algorithm.use_kl_in_reward": (cfg.add_token_level_kl, "add_token_level_kl"),
        "algorithm.kl_ctrl.kl_coef": (cfg.init_kl_coef, "init_kl_coef"),
        "algorithm.kl_ctrl.horizon": (cfg.kl_horizon, "kl_horizon"),
        "actor_rollout_ref.actor.ppo_epochs": (cfg.ppo_epochs, "ppo_epochs"),
        "actor_rollout_ref.actor.grad_clip": (cfg.max_grad_norm, "max_grad_norm"),
        "actor_rollout_ref.actor.clip_ratio": (cfg.pg_clip, "pg_clip"),
        "actor_rollout_ref.actor.use_kl_loss": (cfg.use_kl_loss, "use_kl_loss"),
        "actor_rollout_ref.actor.kl_loss_coef": (cfg.kl_loss_coef, "kl_loss_coef"),
        "actor_rollout_ref.actor.entropy_coeff": (cfg.entropy_loss_coef, "entropy_loss_coef"),
        "actor_rollout_ref.actor.loss_agg_mode": (cfg.loss_agg_mode, "loss_agg_mode"),
        "trainer.critic_warmup": (cfg.critic_warmup, "critic_warmup"),
    }
    for verl_key, (value, roll_key) in sets.items():
        draft.set(verl_key, value, roll_key)
    if cfg.target_kl is not None:
        draft.set("algorithm.kl_ctrl.type", "adaptive", "target_kl")
        draft.set("algorithm.kl_ctrl.target_kl", cfg.target_kl, "target_kl")
    if cfg.use_pg_clip_range:
        draft.set("actor_rollout_ref.actor.clip_ratio_low", cfg.pg_clip_low, "pg_clip_low")
        draft.set("actor_rollout_ref.actor.clip_ratio_high", cfg.pg_clip_high, "pg_clip_high")
    else:
        # ROLL clips both sides at pg_clip; verl's clip_ratio_low/high default to 0.2 themselves.
        draft.set("actor_rollout_ref.actor.clip_ratio_low", cfg.pg_clip, "pg_clip")
        draft.set("actor_rollout_ref.actor.clip_ratio_high", cfg.pg_clip, "pg_clip")
    if not cfg.dual_clip_loss:
        # verl always applies the dual clip; an unreachable bound switches it off exactly.
        draft.set("actor_rollout_ref.actor.clip_ratio_c", 1.0e9, "dual_clip_loss")
    if cfg.value_clip is not None:
        draft.set("critic.cliprange_value", cfg.value_clip, "value_clip")
    _map_rlvr_options(cfg, draft)
    if cfg.enable_reference and not (cfg.use_kl_loss or cfg.add_token_level_kl):
        draft.warn(
            ("enable_reference",),
            "ignored: kuberl computes reference log-probs only for a KL term",
            "set use_kl_loss or add_token_level_kl, or remove it",
            True,
        )
    if cfg.adv_estimator == "gae" and cfg.critic is None:
        draft.error(
            ("adv_estimator",),
            "gae needs a value model, and this config has no critic worker",
            "add a critic worker, or use grpo",
            "gae",
        )
    elif cfg.adv_estimator != "gae" and cfg.critic is not None:
        draft.warn(
            ("critic",),
            f"ignored: {cfg.adv_estimator} uses no value model, so kuberl runs no critic",
            "remove the critic worker",
        )


def _map_rlvr_options(cfg: RollConfig, draft: Draft) -> None:
    """ROLL's RLVR reward/advantage options onto kuberl's algorithm.* keys of the same names."""
    if cfg.reward_clip:  # ROLL tests truthiness: 0 is off
        draft.set("algorithm.reward_clip", cfg.reward_clip, "reward_clip")
    if cfg.advantage_clip is not None:
        draft.set("algorithm.advantage_clip", cfg.advantage_clip, "advantage_clip")
    norms = {"norm_mean_type": cfg.norm_mean_type, "norm_std_type": cfg.norm_std_type}
    for key, value in norms.items():
        if value == "running":
            draft.error(
                (key,),
                "ROLL's running reward statistics are not supported by kuberl",
                "use batch or group, or remove it",
                value,
            )
        elif cfg.adv_estimator == "grpo":
            if value not in (None, "group"):
                draft.warn(
                    (key,),
                    "ignored: ROLL normalises grpo rewards by group mean and std regardless",
                    "remove it",
                    value,
                )
        elif value is not None:
            draft.set(f"algorithm.{key}", value, key)
    if cfg.max_len_mask:
        draft.set("algorithm.max_len_mask", True, "max_len_mask")
    if cfg.difficulty_mask:
        draft.set("algorithm.difficulty_mask", True, "difficulty_mask")
        low, high = cfg.difficulty_low_threshold, cfg.difficulty_high_threshold
        draft.set("algorithm.difficulty_low_threshold", low, "difficulty_low_threshold")
        draft.set("algorithm.difficulty_high_threshold", high, "difficulty_high_threshold")


def _map_forward_batches(cfg: RollConfig, draft: Draft, micro: int | None) -> None:
    """ROLL's infer_batch_size → verl's forward-only micro batches (old and reference log-probs)."""
    old = cfg.actor_train.infer_batch_size or micro
    if old:
        draft.set(
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
            old,
            "actor_train",
            "infer_batch_size",
        )
    ref = (cfg.reference.infer_batch_size if cfg.reference else None) or old
    if ref:
        draft.set(
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
            ref,
            "reference",
            "infer_batch_size",
        )
    if cfg.actor_infer.infer_batch_size is not None:
        draft.warn(
            ("actor_infer", "infer_batch_size"),
            "ignored: kuberl's rollout engine schedules all prompts of a step itself",
            "remove it",
            cfg.actor_infer.infer_batch_size,
        )


def _apply_presets(raw: dict[str, Any]) -> dict[str, Any]:
    """``strategy_config: ${deepspeed_zero3}`` names a preset ROLL pulls in through Hydra."""
    body = dict(raw)
    defaults = body.get("defaults")
    if isinstance(defaults, list) and all(
        isinstance(d, str) and "deepspeed_zero" in d for d in defaults
    ):
        del body["defaults"]
    for role in ("actor_train", "critic", "reference"):
        worker = body.get(role)
        args = worker.get("strategy_args") if isinstance(worker, dict) else None
        preset = args.get("strategy_config") if isinstance(args, dict) else None
        match = _PRESET.match(preset) if isinstance(preset, str) else None
        if match and preset.strip("${} ") not in body:
            stage, offload = int(match.group(1) or 0), bool(match.group(2))
            zero: dict[str, Any] = {"stage": stage}
            if offload:
                zero |= {"offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}
            body[role] = {
                **worker,
                "strategy_args": {**args, "strategy_config": {"zero_optimization": zero}},
            }
    return body
