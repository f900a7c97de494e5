"""verl 0.9.1's other policy-loss modes: clip_cov, kl_cov, geo_mean (GMPO), cispo, sapo,
dppo_tv, dppo_kl and dro, registered beside vanilla/gspo/gpg (`policy_loss.py`).

Each equals verl 0.9.1's `core_algos.compute_policy_loss_<mode>` on the same inputs, gradients
and metrics included (tests/runtime/algorithms/test_verl_parity_losses.py); the formulas are in
each docstring. A mode reads the keywords it names (clip ranges, `LossModeParams` fields) and
absorbs the rest. Metrics: the keys verl's function returns, plus `actor/pg_loss`.
"""

from __future__ import annotations

import torch

from kuberl_runtime.algorithms.aggregation import GlobalBatch, agg_loss
from kuberl_runtime.algorithms.masked import masked_mean
from kuberl_runtime.algorithms.policy_loss import (
    LOG_RATIO_CLAMP,
    PolicyLossOutput,
    register_policy_loss,
    resolve_clip_range,
)

# Binary KL of DPPO: the probabilities' complement is offset by this before the log (verl's).
BINARY_KL_EPS = 1e-8
# GMPO: the per-sequence means divide by (valid tokens + this) (verl's).
GEO_MEAN_EPS = 1e-8
# GMPO's geometric mean of token IS weights: log(w + this).
IS_LOG_EPS = 1e-10


def _out(pg_loss: torch.Tensor, **metrics: torch.Tensor) -> PolicyLossOutput:
    named = {f"actor/{name}": value.detach() for name, value in metrics.items()}
    return pg_loss, {"actor/pg_loss": pg_loss.detach(), **named}


def _weighted(token_loss: torch.Tensor, rollout_is_weights: torch.Tensor | None) -> torch.Tensor:
    return token_loss if rollout_is_weights is None else token_loss * rollout_is_weights


# DPPO's inputs: (old_log_prob, log_prob, advantages, response_mask), and its aggregation
# settings: (loss_agg_mode, rollout_is_weights, loss_scale_factor, global_batch).
_Tensors = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
_Settings = tuple[str, torch.Tensor | None, float | None, GlobalBatch | None]


def _zero(like: torch.Tensor) -> torch.Tensor:
    return torch.zeros((), device=like.device)


@register_policy_loss("clip_cov")
def clip_cov_policy_loss(
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_cov_ratio: float = 0.0002,
    clip_cov_lb: float = 1.0,
    clip_cov_ub: float = 5.0,
    rollout_is_weights: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
    **_: object,
) -> PolicyLossOutput:
    """Clip-Cov (Cui et al., 2025): PPO clip, no dual clip, no log-ratio clamp; then the gradient
    of a random max(1, ⌊clip_cov_ratio·N⌋) tokens is cut (loss × 0) among the valid, unclipped
    tokens whose covariance (A − mean A)·(log π_θ − mean log π_θ) lies in (clip_cov_lb,
    clip_cov_ub); means over this micro-batch's N valid tokens. The pick draws
    `torch.randperm` from torch's global generator, as verl does. pg_clipfrac: the cut share."""
    if clip_cov_ratio <= 0:
        raise ValueError(f"actor.policy_loss.clip_cov_ratio must be > 0, got {clip_cov_ratio}")
    low, high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - low, 1.0 + high)
    valid = response_mask > 0
    cov = (advantages - masked_mean(advantages, response_mask)) * (
        log_prob - masked_mean(log_prob.detach(), response_mask)
    )
    eligible = valid & ~(clipped > unclipped) & (cov > clip_cov_lb) & (cov < clip_cov_ub)
    keep = torch.ones_like(advantages)
    candidates = torch.nonzero(eligible)
    if len(candidates) > 0:
        count = max(int(clip_cov_ratio * response_mask.sum().item()), 1)
        chosen = candidates[torch.randperm(len(candidates))[:count]]
        keep[chosen[:, 0], chosen[:, 1]] = 0
    token_loss = _weighted(torch.maximum(unclipped, clipped) * keep, rollout_is_weights)
    pg_loss = agg_loss(token_loss, response_mask, loss_agg_mode, loss_scale_factor, global_batch)
    return _out(
        pg_loss,
        pg_clipfrac=masked_mean((keep == 0).float(), response_mask),
        ppo_kl=masked_mean(-log_ratio, response_mask),
    )


@register_policy_loss("kl_cov")
def kl_cov_policy_loss(
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    kl_cov_ratio: float = 0.0002,
    ppo_kl_coef: float = 0.1,
    rollout_is_weights: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
    **_: object,
) -> PolicyLossOutput:
    """KL-Cov (Cui et al., 2025): the unclipped surrogate −A·ρ, ρ = exp(log π_θ − log π_old)
    (no clamp); the max(1, ⌊kl_cov_ratio·N⌋) valid tokens of largest covariance
    (A − mean A)·(log π_θ − mean log π_θ) over this micro-batch's N valid tokens get
    + ppo_kl_coef·|log π_θ − log π_old|. ppo_kl: the mean |log-ratio| (verl's)."""
    if not 0 < kl_cov_ratio <= 1:
        raise ValueError(f"actor.policy_loss.kl_cov_ratio must be in (0, 1], got {kl_cov_ratio}")
    log_ratio = log_prob - old_log_prob
    ratio = log_ratio.exp()
    surrogate = -advantages * ratio
    valid = response_mask > 0
    flat_valid = torch.nonzero(valid.reshape(-1), as_tuple=True)[0]
    penalised = torch.zeros(valid.numel(), dtype=torch.bool, device=valid.device)
    if len(flat_valid) > 0:
        adv = advantages[valid].detach().reshape(-1).cpu()
        logp = log_prob[valid].detach().reshape(-1).cpu()
        cov = (adv - adv.mean()) * (logp - logp.mean())
        top = torch.topk(cov, max(1, int(len(cov) * kl_cov_ratio)), largest=True).indices
        penalised[flat_valid[top.to(flat_valid.device)]] = True
    penalised = penalised.reshape(valid.shape)
    token_loss = torch.where(penalised, surrogate + ppo_kl_coef * log_ratio.abs(), surrogate)
    token_loss = _weighted(token_loss, rollout_is_weights)
    pg_loss = agg_loss(token_loss, response_mask, loss_agg_mode, loss_scale_factor, global_batch)
    return _out(pg_loss, ppo_kl=masked_mean(log_ratio.abs(), response_mask))


@register_policy_loss("geo_mean")
def geo_mean_policy_loss(
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    **_: object,
) -> PolicyLossOutput:
    """GMPO (Zhao et al., 2025): per sequence, the geometric mean of token ratios clipped in
    log space, sign-aware: r_t = sgn(A)·min(sgn(A)·δ_t, sgn(A)·clip(δ_t, −ε_low, ε_high)),
    δ_t = log π_θ − log π_old (no clamp); R = exp(Σ m·r_t / (Σ m + 1e-8)); Ā = Σ m·A / (Σ m +
    1e-8) (a sequence-level advantage); loss = mean over ALL rows of −Ā·R, times the rows'
    geometric-mean IS weight when given. As in verl 0.9.1, `loss_agg_mode`, the global batch
    and `loss_scale_factor` are not read: each micro-batch's loss is its own row mean, so the
    accumulated gradient grows with the micro-batches per mini-batch."""
    low, high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    log_ratio = log_prob - old_log_prob
    sign = torch.sign(advantages)
    bounded = log_ratio.clamp(-low, high)
    token_log_ratio = sign * torch.minimum(sign * log_ratio, sign * bounded)
    mask = response_mask.to(log_ratio.dtype)
    lengths = mask.sum(-1) + GEO_MEAN_EPS
    ratio = ((token_log_ratio * mask).sum(-1) / lengths).exp()
    row_loss = -((advantages * mask).sum(-1) / lengths) * ratio
    if rollout_is_weights is not None:
        log_weights = torch.log(rollout_is_weights + IS_LOG_EPS) * mask
        row_loss = row_loss * (log_weights.sum(-1) / lengths).exp()
    pg_loss = row_loss.mean()
    was_clipped = log_ratio != bounded
    return _out(
        pg_loss,
        pg_clipfrac=masked_mean((was_clipped & (advantages > 0)).float(), response_mask),
        ppo_kl=masked_mean(-log_ratio, response_mask),
        pg_clipfrac_lower=masked_mean((was_clipped & (advantages < 0)).float(), response_mask),
    )


@register_policy_loss("cispo")
def cispo_policy_loss(
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
    **_: object,
) -> PolicyLossOutput:
    """CISPO (MiniMax-M1, 2025): −sg(clip(ρ, 1−ε_low, 1+ε_high))·A·log π_θ, ρ = exp(clamp(log
    π_θ − log π_old, ±20)): the clipped IS weight scales a plain policy gradient, every token
    keeps its gradient. pg_clipfrac: share of tokens whose ρ was clipped."""
    low, high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    log_ratio = (log_prob - old_log_prob).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = log_ratio.exp()
    bounded = ratio.clamp(1.0 - low, 1.0 + high)
    token_loss = _weighted(-bounded.detach() * advantages * log_prob, rollout_is_weights)
    pg_loss = agg_loss(token_loss, response_mask, loss_agg_mode, loss_scale_factor, global_batch)
    return _out(
        pg_loss,
        pg_clipfrac=masked_mean((ratio != bounded).float(), response_mask),
        ppo_kl=masked_mean(-log_ratio, response_mask),
        pg_clipfrac_lower=_zero(pg_loss),
    )


@register_policy_loss("sapo")
def sapo_policy_loss(
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    tau_pos: float = 1.0,
    tau_neg: float = 1.05,
    rollout_is_weights: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
    **_: object,
) -> PolicyLossOutput:
    """SAPO (Gao et al., 2025): a smooth gate instead of a clip, −A·σ(τ(ρ − 1))·4/τ with
    τ = tau_pos where A > 0 else tau_neg, ρ = exp(clamp(log π_θ − log π_old, ±20)). Always
    aggregated seq-mean-token-mean, whatever `loss_agg_mode` says (verl 0.9.1's choice)."""
    dtype, device = advantages.dtype, advantages.device
    positive = torch.as_tensor(tau_pos, dtype=dtype, device=device)
    negative = torch.as_tensor(tau_neg, dtype=dtype, device=device)
    log_ratio = (log_prob - old_log_prob).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    tau = torch.where(advantages > 0, positive, negative)
    gate = torch.sigmoid(tau * (log_ratio.exp() - 1.0)) * (4.0 / tau)
    token_loss = _weighted(-gate * advantages, rollout_is_weights)
    pg_loss = agg_loss(
        token_loss, response_mask, "seq-mean-token-mean", loss_scale_factor, global_batch
    )
    zero = _zero(pg_loss)
    return _out(
        pg_loss,
        pg_clipfrac=zero,
        ppo_kl=masked_mean(-log_ratio, response_mask),
        pg_clipfrac_lower=zero,
    )


def _dppo(
    trust: torch.Tensor, tensors: _Tensors, settings: _Settings, clip_ratio_c: float
) -> PolicyLossOutput:
    """DPPO's shared part: −A·sg(min(ρ, clip_ratio_c))·log π_θ on the tokens `trust` keeps."""
    old_log_prob, log_prob, advantages, response_mask = tensors
    loss_agg_mode, rollout_is_weights, loss_scale_factor, global_batch = settings
    log_ratio = (log_prob - old_log_prob).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = log_ratio.exp()
    truncated = ratio.clamp(max=clip_ratio_c).detach()
    kept = trust.detach().float()
    token_loss = _weighted(-advantages * truncated * log_prob * kept, rollout_is_weights)
    pg_loss = agg_loss(token_loss, response_mask, loss_agg_mode, loss_scale_factor, global_batch)
    return _out(
        pg_loss,
        pg_clipfrac=masked_mean(1.0 - kept, response_mask),
        ppo_kl=masked_mean(-log_ratio, response_mask),
        pg_clipfrac_lower=masked_mean((ratio > clip_ratio_c).float() * kept, response_mask),
    )


@register_policy_loss("dppo_tv")
def dppo_tv_policy_loss(
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    rollout_is_weights: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
    **_: object,
) -> PolicyLossOutput:
    """DPPO-Binary-TV (arXiv 2602.04879): a token counts unless its probability moved past the
    divergence bound in the advantage's direction: for A > 0, π_θ − π_old ≤ ε_high; else
    π_θ − π_old ≥ −ε_low (clip_ratio* are TV thresholds here). The IS weight is truncated at
    clip_ratio_c instead of a dual clip; no clip on the ratio itself. pg_clipfrac: tokens
    dropped; pg_clipfrac_lower: kept tokens whose ratio was truncated."""
    low, high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    moved = log_prob.exp() - old_log_prob.exp()
    trust = torch.where(advantages > 0, moved <= high, moved >= -low)
    tensors = (old_log_prob, log_prob, advantages, response_mask)
    settings = (loss_agg_mode, rollout_is_weights, loss_scale_factor, global_batch)
    return _dppo(trust, tensors, settings, clip_ratio_c)


@register_policy_loss("dppo_kl")
def dppo_kl_policy_loss(
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    rollout_is_weights: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
    **_: object,
) -> PolicyLossOutput:
    """DPPO-Binary-KL (arXiv 2602.04879): as dppo_tv with the binary KL between the sampled
    token's old and new probabilities, p·(log p − log q) + (1−p)·log((1−p+1e-8)/(1−q+1e-8)),
    p = π_old, q = π_θ: for A > 0 a token counts if that KL ≤ ε_high or q ≤ p; else if it is
    ≤ ε_low or q ≥ p."""
    low, high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    q, p = log_prob.exp(), old_log_prob.exp()
    binary_kl = p * (old_log_prob - log_prob) + (1 - p) * torch.log(
        (1.0 - p + BINARY_KL_EPS) / (1.0 - q + BINARY_KL_EPS)
    )
    trust = torch.where(
        advantages > 0, (binary_kl <= high) | (q <= p), (binary_kl <= low) | (q >= p)
    )
    tensors = (old_log_prob, log_prob, advantages, response_mask)
    settings = (loss_agg_mode, rollout_is_weights, loss_scale_factor, global_batch)
    return _dppo(trust, tensors, settings, clip_ratio_c)


@register_policy_loss("dro")
def dro_policy_loss(
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    dro_beta: float = 0.0,
    rollout_is_weights: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
    **_: object,
) -> PolicyLossOutput:
    """DRO (direct reward optimisation): −(A·log π_θ − β/2·(log π_θ − log π_old)²), β =
    dro_beta > 0 (verl refuses it unset)."""
    if dro_beta <= 0:
        raise ValueError(
            f"actor.policy_loss.dro_beta must be > 0 for loss_mode dro, got {dro_beta}"
        )
    log_ratio = log_prob - old_log_prob
    token_loss = -(log_prob * advantages - 0.5 * dro_beta * log_ratio.square())
    token_loss = _weighted(token_loss, rollout_is_weights)
    pg_loss = agg_loss(token_loss, response_mask, loss_agg_mode, loss_scale_factor, global_batch)
    return _out(pg_loss, ppo_kl=masked_mean(-log_ratio, response_mask))
