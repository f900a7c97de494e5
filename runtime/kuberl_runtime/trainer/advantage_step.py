"""The step's scores become advantages, in verl's order: ROLL's RLVR score shaping (off unless
set), the in-reward KL penalty, rollout correction's decoupled mode
(`trainer/rollout_correction.py`), then the advantage estimator (ROLL's, with its loss mask,
when its options are on)."""

from __future__ import annotations

from typing import Any

from kuberl_api.plan import RunPlan
from kuberl_runtime.algorithms import apply_kl_penalty, compute_advantage
from kuberl_runtime.algorithms.kl_control import KLController
from kuberl_runtime.algorithms.roll_rlvr import RollRLVROptions, roll_advantages, shape_scores
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.rollout_correction import correct_batch


def compute_advantages(
    batch: Batch, plan: RunPlan, kl_ctrl: KLController | None
) -> dict[str, float]:
    """Fill the batch's token-level rewards, advantages and returns; the step's metrics.
    `kl_ctrl`: the in-reward KL controller, None without algorithm.use_kl_in_reward."""
    algo = plan.algorithm
    metrics: dict[str, float] = {}
    scores = batch["token_level_scores"]
    # ROLL's RLVR options (off unless set): masks, score normalisation and clips.
    roll = RollRLVROptions.from_settings(**algo.roll_rlvr.model_dump())
    if roll.active:
        shaped = shape_scores(
            scores,
            batch["response_mask"],
            batch.objects["uid"],
            plan.rollout.response_length,
            algo.adv_estimator,
            roll,
        )
        scores, metrics = shaped.token_level_scores, dict(shaped.metrics)
    if kl_ctrl is not None:
        rewards, kl_metrics = apply_kl_penalty(
            token_level_scores=scores,
            response_mask=batch["response_mask"],
            old_log_probs=batch["old_log_probs"],
            ref_log_prob=batch["ref_log_prob"],
            kl_ctrl=kl_ctrl,
            kl_penalty_type=algo.kl_penalty,
        )
        metrics.update(kl_metrics)
        batch["token_level_rewards"] = rewards
    else:
        batch["token_level_rewards"] = scores
    # verl's order: rollout correction after the in-reward KL, before the advantages.
    metrics.update(correct_batch(batch, plan.rollout_correction))
    estimator_inputs: dict[str, Any] = {
        "index": batch.objects["uid"],
        "values": batch.tensors.get("values"),
        "reward_baselines": batch.tensors.get("reward_baselines"),
        "gamma": algo.gamma,
        "lam": algo.lam,
        "norm_adv_by_std_in_grpo": algo.norm_adv_by_std_in_grpo,
    }
    if roll.active:
        advantages, returns, final_mask, roll_metrics = roll_advantages(
            algo.adv_estimator,
            token_level_rewards=batch["token_level_rewards"],
            response_mask=batch["response_mask"],
            sample_keep=shaped.sample_mask,
            options=roll,
            **estimator_inputs,
        )
        metrics.update(roll_metrics)
        batch["final_response_mask"] = final_mask  # the updates' loss mask (ROLL's)
    else:
        advantages, returns = compute_advantage(
            algo.adv_estimator,
            token_level_rewards=batch["token_level_rewards"],
            response_mask=batch["response_mask"],
            **estimator_inputs,
        )
    batch["advantages"], batch["returns"] = advantages, returns
    return metrics
