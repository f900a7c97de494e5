"""Rollout correction in the step, as verl 0.9.1's trainer runs it (plan.rollout_correction).

* The rollout returns its log-probs (`rollout_log_probs`) when the plan says
  `calculate_log_probs` (trainer/generation.py).
* Bypass mode: π_old is the rollout's log-probs (`use_rollout_as_old`); no old-log-prob pass; the
  actor's loss is `bypass_policy_loss` (engine/actor.py), which weighs and rejects per micro-batch
  against the current policy and logs `rollout_corr/*` from the update.
* Decoupled mode (`correct_batch`, after the in-reward KL, before the advantages): π_old from the
  old-log-prob pass against π_rollout: IS weights into the batch (`rollout_is_weights`, read by
  every policy loss), rejected tokens out of `response_mask`, and the mismatch metrics:
  `rollout_corr/*` and verl's `training/rollout_probs_diff_*`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from kuberl_api.plan.rollout_correction import RolloutCorrectionPlan
from kuberl_runtime.algorithms.aggregation import GlobalBatch
from kuberl_runtime.algorithms.policy_loss import PolicyLossOutput, compute_policy_loss
from kuberl_runtime.algorithms.rollout_correction import ISSpec, RSSpec, rollout_correction
from kuberl_runtime.algorithms.rollout_correction_loss import bypass_policy_loss
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.generation import ROLLOUT_LOG_PROBS

ROLLOUT_IS_WEIGHTS = "rollout_is_weights"


def correction_specs(plan: RolloutCorrectionPlan) -> tuple[ISSpec | None, tuple[RSSpec, ...]]:
    importance = (
        ISSpec(
            plan.rollout_is,
            plan.rollout_is_threshold_upper,
            plan.rollout_is_threshold_lower,
            plan.rollout_is_batch_normalize,
        )
        if plan.rollout_is
        else None
    )
    rejection = tuple(RSSpec(r.option, r.upper, r.lower) for r in plan.rollout_rs)
    return importance, rejection


def use_rollout_as_old(batch: Batch) -> None:
    """Bypass mode: the rollout's log-probs stand for π_old."""
    batch["old_log_probs"] = rollout_log_probs(batch)


def rollout_log_probs(batch: Batch) -> torch.Tensor:
    if ROLLOUT_LOG_PROBS not in batch.tensors:
        raise ValueError(
            "algorithm.rollout_correction / rollout.calculate_log_probs need the rollout's "
            "log-probs, and this rollout returned none; "
            "set rollout.calculate_log_probs: false and turn the correction off"
        )
    return batch[ROLLOUT_LOG_PROBS]


def correct_batch(batch: Batch, plan: RolloutCorrectionPlan) -> dict[str, float]:
    """Decoupled mode's correction of the whole batch; its metrics (none without the rollout's
    log-probs, or in bypass mode, where the actor corrects per micro-batch)."""
    if not plan.calculate_log_probs or plan.bypass_mode:
        return {}
    rollout = rollout_log_probs(batch)
    metrics = rollout_probs_diff_metrics(batch["old_log_probs"], rollout, batch["response_mask"])
    importance, rejection = correction_specs(plan)
    correction = rollout_correction(
        batch["old_log_probs"],
        rollout,
        batch["response_mask"],
        importance,
        rejection,
    )
    batch["response_mask"] = correction.response_mask
    if correction.weights is not None:
        batch[ROLLOUT_IS_WEIGHTS] = correction.weights
    return {**metrics, **correction.metrics}


def rollout_probs_diff_metrics(
    actor_log_probs: torch.Tensor, rollout_log_probs: torch.Tensor, mask: torch.Tensor
) -> dict[str, float]:
    """verl's `training/rollout_probs_diff_*`: |p_actor − p_rollout| over the response tokens
    (max, mean, std) and the Pearson correlation of the two probabilities."""
    valid = mask.bool()
    if not bool(valid.any()):
        nan = float("nan")
        return {
            "training/rollout_probs_diff_valid": 0,
            "training/rollout_probs_diff_max": nan,
            "training/rollout_probs_diff_mean": nan,
            "training/rollout_probs_diff_std": nan,
            "training/rollout_actor_probs_pearson_corr": nan,
        }
    actor, rollout = actor_log_probs.exp()[valid], rollout_log_probs.exp()[valid]
    diff = (actor - rollout).abs()
    return {
        "training/rollout_probs_diff_valid": 1,
        "training/rollout_probs_diff_max": diff.max().item(),
        "training/rollout_probs_diff_mean": diff.mean().item(),
        "training/rollout_probs_diff_std": diff.std().item(),
        "training/rollout_actor_probs_pearson_corr": torch.corrcoef(torch.stack([actor, rollout]))[
            0, 1
        ].item(),
    }


def policy_loss_fn(plan: RolloutCorrectionPlan | None) -> Callable[..., PolicyLossOutput]:
    """The actor's policy loss: `compute_policy_loss` (IS weights from the batch, if any), or in
    bypass mode the bypass loss with the same keywords (its `loss_type` replaces `loss_mode`;
    validation warns when another loss mode was written)."""
    if plan is None or not plan.bypass_mode:
        return compute_policy_loss
    importance, rejection = correction_specs(plan)

    def bypass_loss(
        _loss_mode: str,
        *,
        old_log_prob: torch.Tensor,
        log_prob: torch.Tensor,
        advantages: torch.Tensor,
        response_mask: torch.Tensor,
        loss_agg_mode: str,
        clip_ratio: float,
        clip_ratio_low: float | None,
        clip_ratio_high: float | None,
        clip_ratio_c: float,
        loss_scale_factor: float | None,
        global_batch: GlobalBatch | None,
        **_: object,
    ) -> PolicyLossOutput:
        return bypass_policy_loss(
            loss_type=plan.loss_type,
            log_prob=log_prob,
            rollout_log_prob=old_log_prob,  # use_rollout_as_old put them there
            advantages=advantages,
            response_mask=response_mask,
            importance=importance,
            rejection=rejection,
            loss_agg_mode=loss_agg_mode,
            clip_ratio=clip_ratio,
            clip_ratio_low=clip_ratio_low,
            clip_ratio_high=clip_ratio_high,
            clip_ratio_c=clip_ratio_c,
            loss_scale_factor=loss_scale_factor,
            global_batch=global_batch,
        )

    return bypass_loss
