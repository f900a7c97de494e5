"""Outcome-reward estimators with a per-prompt group baseline: GRPO and its relatives.

Each reduces a row to its outcome score s_i = Σ_t m·r (masked, so padding never counts), compares
it with the other responses to the same prompt (same uid), and broadcasts the resulting scalar
over the row's response tokens. Groups are found by uid, never by position in the batch.
"""

from __future__ import annotations

import torch

from kuberl_runtime.algorithms.advantages import register_advantage_estimator, require, zero_outside
from kuberl_runtime.algorithms.groups import (
    GroupIndex,
    group_ids,
    group_mean,
    group_reduce,
    group_sizes,
    group_std,
)
from kuberl_runtime.algorithms.masked import masked_sum, masked_whiten

# GRPO's epsilon in the std divisor (verl `compute_grpo_outcome_advantage`).
GRPO_EPS = 1e-6


def outcome_scores(token_level_rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """s_i = Σ_t m_{i,t}·r_{i,t}, one score per row."""
    return masked_sum(token_level_rewards, response_mask, dim=-1)


def broadcast_over_tokens(per_row: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    return zero_outside(
        per_row.unsqueeze(-1).expand_as(response_mask).to(per_row.dtype), response_mask
    )


def _groups(
    index: GroupIndex | None, scores: torch.Tensor, estimator: str
) -> tuple[torch.Tensor, int]:
    ids, num_groups = group_ids(require(index, "index (per-prompt uid)", estimator), scores.device)
    if ids.shape[0] != scores.shape[0]:
        raise ValueError(f"index has {ids.shape[0]} uids for {scores.shape[0]} rows")
    return ids, num_groups


def baseline_mean(scores: torch.Tensor, ids: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Per-row group mean, 0 for a prompt sampled once (it has nothing to compare with)."""
    singleton = group_sizes(ids, num_groups) == 1
    mean = group_mean(scores, ids, num_groups)
    return torch.where(singleton, torch.zeros_like(mean), mean)[ids]


@register_advantage_estimator("grpo")
def grpo_advantage(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIndex | None = None,
    norm_adv_by_std_in_grpo: bool = True,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO: Â_i = (s_i − μ_g)/(σ_g + 1e-6), σ unbiased; without std-norm (Dr.GRPO) s_i − μ_g.

    A singleton group uses μ = 0, σ = 1. returns = advantages.
    """
    scores = outcome_scores(token_level_rewards, response_mask)
    ids, num_groups = _groups(index, scores, "grpo")
    centered = scores - baseline_mean(scores, ids, num_groups)
    if norm_adv_by_std_in_grpo:
        singleton = group_sizes(ids, num_groups) == 1
        std = torch.where(singleton, 1.0, group_std(scores, ids, num_groups))
        centered = centered / (std[ids] + GRPO_EPS)
    advantages = broadcast_over_tokens(centered, response_mask)
    return advantages, advantages


@register_advantage_estimator("grpo_passk")
def grpo_passk_advantage(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIndex | None = None,
    norm_adv_by_std_in_grpo: bool = True,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pass@k GRPO: only the best response of a group is credited, with Â = r_max − r_second.

    Divided by (σ_g + 1e-6) when std-norm is on; every other response gets 0. Ties for the best
    give a zero gap, so which tied row is "best" never matters. Groups need ≥ 2 samples.
    """
    scores = outcome_scores(token_level_rewards, response_mask)
    ids, num_groups = _groups(index, scores, "grpo_passk")
    if bool((group_sizes(ids, num_groups) < 2).any()):
        raise ValueError(
            "adv_estimator='grpo_passk' needs at least 2 responses per prompt (rollout.n ≥ 2)"
        )
    best = group_reduce(scores, ids, num_groups, "amax")
    rows = torch.arange(scores.shape[0], device=scores.device)
    candidates = torch.where(scores == best[ids], rows, scores.shape[0])
    winner = rows == group_reduce(candidates, ids, num_groups, "amin")[ids]
    others = torch.where(winner, torch.full_like(scores, float("-inf")), scores)
    gap = best - group_reduce(others, ids, num_groups, "amax")
    if norm_adv_by_std_in_grpo:
        gap = gap / (group_std(scores, ids, num_groups) + GRPO_EPS)
    per_row = torch.where(winner, gap[ids], torch.zeros_like(scores))
    advantages = broadcast_over_tokens(per_row, response_mask)
    return advantages, advantages


@register_advantage_estimator("rloo")
def rloo_advantage(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIndex | None = None,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RLOO: Â_i = s_i − mean of the other k−1 = k/(k−1)·(s_i − μ_g); a singleton keeps s_i."""
    scores = outcome_scores(token_level_rewards, response_mask)
    ids, num_groups = _groups(index, scores, "rloo")
    k = group_sizes(ids, num_groups).to(scores.dtype)[ids]
    centered = (scores - group_mean(scores, ids, num_groups)[ids]) * k / (k - 1)
    per_row = torch.where(k > 1, centered, scores)
    advantages = broadcast_over_tokens(per_row, response_mask)
    return advantages, advantages


@register_advantage_estimator("reinforce_plus_plus_baseline")
def reinforce_plus_plus_baseline_advantage(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIndex | None = None,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++ with baseline: s_i − μ_g on every token, then whitened over the whole batch."""
    scores = outcome_scores(token_level_rewards, response_mask)
    ids, num_groups = _groups(index, scores, "reinforce_plus_plus_baseline")
    tokens = broadcast_over_tokens(scores - baseline_mean(scores, ids, num_groups), response_mask)
    advantages = zero_outside(masked_whiten(tokens, response_mask), response_mask)
    return advantages, advantages


@register_advantage_estimator("opo")
def opo_advantage(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIndex | None = None,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """OPO: baseline b_g = Σ_j |o_j|·s_j / Σ_j |o_j| (length-weighted); Â_i = s_i − b_g."""
    scores = outcome_scores(token_level_rewards, response_mask)
    ids, num_groups = _groups(index, scores, "opo")
    lengths = response_mask.sum(-1).to(scores.dtype)
    singleton = group_sizes(ids, num_groups) == 1
    baseline = group_mean(scores, ids, num_groups, weights=lengths)
    baseline = torch.where(singleton, torch.zeros_like(baseline), baseline)
    advantages = broadcast_over_tokens(scores - baseline[ids], response_mask)
    return advantages, advantages


@register_advantage_estimator("gpg")
def gpg_advantage(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIndex | None = None,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GPG: Â_i = α·(s_i − μ_g), α = rows / max(#rows with s ≠ 0, 1); no std division.

    Pair with `policy_loss.loss_mode: gpg`.
    """
    scores = outcome_scores(token_level_rewards, response_mask)
    ids, num_groups = _groups(index, scores, "gpg")
    alpha = scores.shape[0] / max(int(torch.count_nonzero(scores).item()), 1)
    per_row = alpha * (scores - baseline_mean(scores, ids, num_groups))
    advantages = broadcast_over_tokens(per_row, response_mask)
    return advantages, advantages
