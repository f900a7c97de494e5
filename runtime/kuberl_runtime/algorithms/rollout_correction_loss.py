"""Bypass mode's policy loss (verl 0.9.1 `rollout_correction.bypass_mode`): π_old is the rollout's
own log-probs, so the update corrects π_θ against π_rollout directly.

Per micro-batch, without gradient: IS weights and rejection from log π_θ − log π_rollout
(`rollout_correction`); the rejected tokens leave the loss mask. Then, by `loss_type`:

* ppo_clip: the vanilla PPO clip with π_old = π_rollout, no IS weights (the ratio is the
  correction; weighting again would count it twice);
* reinforce: −A · w · log π_θ with the detached IS weights w (none: plain REINFORCE).
"""

from __future__ import annotations

import torch

from kuberl_runtime.algorithms.aggregation import GlobalBatch, agg_loss
from kuberl_runtime.algorithms.masked import masked_mean
from kuberl_runtime.algorithms.policy_loss import PolicyLossOutput, compute_policy_loss
from kuberl_runtime.algorithms.rollout_correction import ISSpec, RSSpec, rollout_correction

BYPASS_LOSS_TYPES = ("ppo_clip", "reinforce")


def bypass_policy_loss(
    *,
    loss_type: str,
    log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    importance: ISSpec | None,
    rejection: tuple[RSSpec, ...] = (),
    loss_agg_mode: str = "token-mean",
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
) -> PolicyLossOutput:
    """The loss and metrics (the PPO metrics plus every `rollout_corr/*` of this micro-batch)."""
    if loss_type not in BYPASS_LOSS_TYPES:
        raise ValueError(
            f"rollout_correction.loss_type must be one of {BYPASS_LOSS_TYPES}, got {loss_type!r}"
        )
    with torch.no_grad():
        correction = rollout_correction(
            log_prob.detach(), rollout_log_prob, response_mask, importance, rejection
        )
    mask = correction.response_mask
    if loss_type == "ppo_clip":
        loss, metrics = compute_policy_loss(
            "vanilla",
            old_log_prob=rollout_log_prob,
            log_prob=log_prob,
            advantages=advantages,
            response_mask=mask,
            loss_agg_mode=loss_agg_mode,
            clip_ratio=clip_ratio,
            clip_ratio_low=clip_ratio_low,
            clip_ratio_high=clip_ratio_high,
            clip_ratio_c=clip_ratio_c,
            loss_scale_factor=loss_scale_factor,
            global_batch=global_batch,
        )
    else:
        token_loss = -advantages * log_prob
        if correction.weights is not None:
            token_loss = token_loss * correction.weights
        loss = agg_loss(token_loss, mask, loss_agg_mode, loss_scale_factor, global_batch)
        zero = torch.zeros((), device=loss.device)
        metrics = {
            "actor/pg_loss": loss.detach(),
            "actor/pg_clipfrac": zero,
            "actor/ppo_kl": masked_mean(rollout_log_prob - log_prob.detach(), mask),
            "actor/pg_clipfrac_lower": zero,
        }
    extra = {key: torch.tensor(value) for key, value in correction.metrics.items()}
    return loss, {**metrics, **extra}
