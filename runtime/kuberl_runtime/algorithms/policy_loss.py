"""Policy-gradient losses selected by `actor.policy_loss.loss_mode`, and their registry.

Every loss takes the same keywords (see `compute_policy_loss`; the parameters of the other loss
modes come as `LossModeParams`' fields), declares the ones it uses and absorbs the rest with
`**_`, and returns (pg_loss, metrics) with verl's metric keys: `actor/pg_loss`,
`actor/pg_clipfrac`, `actor/ppo_kl`, `actor/pg_clipfrac_lower` (detached). The modes of
`policy_loss_extra.py` return the keys verl 0.9.1's own function returns, plus `actor/pg_loss`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from kuberl_runtime.algorithms.aggregation import GlobalBatch, agg_loss
from kuberl_runtime.algorithms.masked import masked_mean, masked_sum
from kuberl_runtime.algorithms.registry import Registry

PolicyLossOutput = tuple[torch.Tensor, dict[str, torch.Tensor]]
PolicyLoss = Callable[..., PolicyLossOutput]

POLICY_LOSSES: Registry[PolicyLoss] = Registry("policy loss")

# log π_θ − log π_old is clamped before exp so one stale token cannot overflow the ratio.
LOG_RATIO_CLAMP = 20.0
# GSPO clamps its (sequence-level) log-ratio from above only.
GSPO_LOG_RATIO_MAX = 10.0


@dataclass(frozen=True)
class LossModeParams:
    """Parameters only some loss modes read, at verl 0.9.1's defaults (`actor.policy_loss.*`,
    `actor.tau_pos`/`tau_neg`): each mode of `policy_loss_extra.py` names the ones it uses."""

    clip_cov_ratio: float = 0.0002
    clip_cov_lb: float = 1.0
    clip_cov_ub: float = 5.0
    kl_cov_ratio: float = 0.0002
    ppo_kl_coef: float = 0.1
    tau_pos: float = 1.0
    tau_neg: float = 1.05
    dro_beta: float = 0.0
    """Only `dro` reads it; verl's null (unset) is 0 here, refused by validation for dro."""


def register_policy_loss(*names: str) -> Callable[[PolicyLoss], PolicyLoss]:
    """Decorator: make a loss selectable as `actor.policy_loss.loss_mode: <name>`."""
    return POLICY_LOSSES.register(*names)


def get_policy_loss_fn(name: str) -> PolicyLoss:
    """The loss registered as `name`; UnknownAlgorithmError lists the known names."""
    return POLICY_LOSSES.get(name)


def compute_policy_loss(
    loss_mode: str,
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
    mode_params: LossModeParams | None = None,
) -> PolicyLossOutput:
    """Run the loss named `loss_mode`; all tensors are (rows, L) over response tokens.

    `global_batch` selects verl's global-batch aggregation (see `aggregation.GlobalBatch`);
    `mode_params` the other modes' parameters (verl's defaults when None).
    """
    return get_policy_loss_fn(loss_mode)(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=response_mask,
        loss_agg_mode=loss_agg_mode,
        clip_ratio=clip_ratio,
        clip_ratio_low=clip_ratio_low,
        clip_ratio_high=clip_ratio_high,
        clip_ratio_c=clip_ratio_c,
        rollout_is_weights=rollout_is_weights,
        loss_scale_factor=loss_scale_factor,
        global_batch=global_batch,
        **asdict(mode_params or LossModeParams()),
    )


def resolve_clip_range(
    clip_ratio: float, clip_ratio_low: float | None, clip_ratio_high: float | None
) -> tuple[float, float]:
    """(ε_low, ε_high): each side's own value when set, else `clip_ratio`."""
    low = clip_ratio if clip_ratio_low is None else clip_ratio_low
    high = clip_ratio if clip_ratio_high is None else clip_ratio_high
    return low, high


def _metrics(
    pg_loss: torch.Tensor,
    clipfrac: torch.Tensor,
    ppo_kl: torch.Tensor,
    clipfrac_lower: torch.Tensor,
) -> dict[str, torch.Tensor]:
    return {
        "actor/pg_loss": pg_loss.detach(),
        "actor/pg_clipfrac": clipfrac.detach(),
        "actor/ppo_kl": ppo_kl.detach(),
        "actor/pg_clipfrac_lower": clipfrac_lower.detach(),
    }


def _weighted(token_loss: torch.Tensor, rollout_is_weights: torch.Tensor | None) -> torch.Tensor:
    return token_loss if rollout_is_weights is None else token_loss * rollout_is_weights


@register_policy_loss("vanilla")
def vanilla_policy_loss(
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
    """PPO clipped surrogate with dual clip (Ye et al., 2020) for negative advantages.

    ρ = exp(clamp(log π_θ − log π_old, ±20)); L1 = −A·ρ; L2 = −A·clip(ρ, 1−ε_low, 1+ε_high);
    Lc = max(L1, L2); for A < 0 the loss is min(Lc, −A·clip_ratio_c), else Lc.

    ε_low/ε_high are `clip_ratio_low`/`clip_ratio_high` when set and fall back to `clip_ratio`
    when they are None, as in verl 0.9.1 (where defaults, not this function, decide which wins).
    """
    if clip_ratio_c <= 1.0:
        raise ValueError(f"actor.clip_ratio_c must be > 1 for the dual clip, got {clip_ratio_c}")
    low, high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    log_ratio = (log_prob - old_log_prob).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = log_ratio.exp()
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - low, 1.0 + high)
    clip_loss = torch.maximum(unclipped, clipped)
    dual_bound = -advantages * clip_ratio_c
    negative = advantages < 0
    token_loss = torch.where(negative, torch.minimum(clip_loss, dual_bound), clip_loss)
    token_loss = _weighted(token_loss, rollout_is_weights)
    pg_loss = agg_loss(token_loss, response_mask, loss_agg_mode, loss_scale_factor, global_batch)
    return pg_loss, _metrics(
        pg_loss,
        clipfrac=masked_mean((clipped > unclipped).float(), response_mask),
        ppo_kl=masked_mean(-log_ratio, response_mask),
        clipfrac_lower=masked_mean(((clip_loss > dual_bound) & negative).float(), response_mask),
    )


@register_policy_loss("gspo")
def gspo_policy_loss(
    *,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
    **_: object,
) -> PolicyLossOutput:
    """GSPO: PPO clip on the sequence-level ratio s_i = exp(mean_t(log π_θ − log π_old)).

    Token-wise s_{i,t} = sg(s_i)·π_θ(a_t)/sg(π_θ(a_t)): the value of the sequence ratio with a
    per-token gradient; log s clamped at ≤ 10. Aggregated with `loss_agg_mode` as verl 0.9.1's
    workers pass it (the paper's choice, seq-mean-token-mean, is only the default). No dual clip.
    """
    low, high = resolve_clip_range(clip_ratio, clip_ratio_low, clip_ratio_high)
    log_ratio = log_prob - old_log_prob
    lengths = response_mask.sum(-1).clamp(min=1)
    seq_log_ratio = masked_sum(log_ratio, response_mask, dim=-1) / lengths
    token_log_ratio = log_prob - log_prob.detach() + seq_log_ratio.detach().unsqueeze(-1)
    ratio = token_log_ratio.clamp(max=GSPO_LOG_RATIO_MAX).exp()
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - low, 1.0 + high)
    token_loss = _weighted(torch.maximum(unclipped, clipped), rollout_is_weights)
    pg_loss = agg_loss(token_loss, response_mask, loss_agg_mode, loss_scale_factor, global_batch)
    return pg_loss, _metrics(
        pg_loss,
        clipfrac=masked_mean((clipped > unclipped).float(), response_mask),
        ppo_kl=masked_mean(-log_ratio, response_mask),
        clipfrac_lower=torch.zeros((), device=pg_loss.device),
    )


@register_policy_loss("gpg")
def gpg_policy_loss(
    *,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    rollout_is_weights: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
    **_: object,
) -> PolicyLossOutput:
    """GPG: plain policy gradient −A·log π_θ, no ratio and no clip (pair with adv_estimator gpg)."""
    token_loss = _weighted(-advantages * log_prob, rollout_is_weights)
    pg_loss = agg_loss(token_loss, response_mask, loss_agg_mode, loss_scale_factor, global_batch)
    zero = torch.zeros((), device=pg_loss.device)
    return pg_loss, _metrics(pg_loss, clipfrac=zero, ppo_kl=zero, clipfrac_lower=zero)
