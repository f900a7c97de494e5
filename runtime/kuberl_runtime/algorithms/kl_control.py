"""In-reward KL (`algorithm.use_kl_in_reward`) and the controllers that set its coefficient β."""

from __future__ import annotations

import torch

from kuberl_runtime.algorithms.kl import kl_penalty
from kuberl_runtime.algorithms.masked import masked_mean

# Adaptive controller's bound on the proportional error (Ziegler et al., 2019).
ADAPTIVE_KL_ERROR_CLIP = 0.2


class FixedKLController:
    """β stays at `kl_coef` (`algorithm.kl_ctrl.type: fixed`)."""

    def __init__(self, kl_coef: float) -> None:
        self.value = kl_coef

    def update(self, current_kl: float, n_steps: int) -> None:
        """Nothing to adapt; present so both controllers are used the same way."""


class AdaptiveKLController:
    """β tracks a target KL (`algorithm.kl_ctrl.type: adaptive`).

    e = clip(current_kl/target_kl − 1, −0.2, 0.2); β ← β·(1 + e·n_steps/horizon).
    """

    def __init__(self, init_kl_coef: float, target_kl: float, horizon: int) -> None:
        if horizon <= 0:
            raise ValueError(f"algorithm.kl_ctrl.horizon must be > 0, got {horizon}")
        if target_kl <= 0:
            raise ValueError(f"algorithm.kl_ctrl.target_kl must be > 0, got {target_kl}")
        self.value = init_kl_coef
        self.target = target_kl
        self.horizon = horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        error = current_kl / self.target - 1
        error = min(max(error, -ADAPTIVE_KL_ERROR_CLIP), ADAPTIVE_KL_ERROR_CLIP)
        self.value *= 1 + error * n_steps / self.horizon


KLController = FixedKLController | AdaptiveKLController


def build_kl_controller(
    kl_ctrl_type: str, *, kl_coef: float, target_kl: float = 0.1, horizon: int = 10000
) -> KLController:
    """The controller for `algorithm.kl_ctrl.{type, kl_coef, target_kl, horizon}`."""
    if kl_ctrl_type == "fixed":
        return FixedKLController(kl_coef)
    if kl_ctrl_type == "adaptive":
        return AdaptiveKLController(kl_coef, target_kl=target_kl, horizon=horizon)
    raise ValueError(f"unknown algorithm.kl_ctrl.type {kl_ctrl_type!r}; known: adaptive, fixed")


def apply_kl_penalty(
    *,
    token_level_scores: torch.Tensor,
    response_mask: torch.Tensor,
    old_log_probs: torch.Tensor,
    ref_log_prob: torch.Tensor,
    kl_ctrl: KLController,
    kl_penalty_type: str = "kl",
    logits: torch.Tensor | None = None,
    ref_logits: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """token_level_rewards = token_level_scores − β·kld on every response token.

    kld uses the `algorithm.kl_penalty` estimator between the rollout-time (old) policy and the
    reference. current_kl = mean over rows of each row's token-mean kld. The controller is the
    one piece of state here: it is updated with (current_kl, rows) *after* β was read, so the
    reported `actor/reward_kl_penalty_coeff` is the β these rewards used.
    """
    kld = kl_penalty(
        old_log_probs,
        ref_log_prob,
        kl_type=kl_penalty_type,
        logits=logits,
        ref_logits=ref_logits,
    )
    kld = torch.where(response_mask.bool(), kld, torch.zeros((), dtype=kld.dtype))
    beta = kl_ctrl.value
    token_level_rewards = token_level_scores - beta * kld
    current_kl = float(masked_mean(kld, response_mask, dim=-1).mean().item())
    kl_ctrl.update(current_kl=current_kl, n_steps=token_level_scores.shape[0])
    metrics = {"actor/reward_kl_penalty": current_kl, "actor/reward_kl_penalty_coeff": beta}
    return token_level_rewards, metrics
