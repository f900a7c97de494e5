"""Advantage estimators selected by `algorithm.adv_estimator`, and the registry behind the name.

Every estimator is called with one keyword signature (see `compute_advantage`) and returns
`(advantages, returns)`, both shaped like `token_level_rewards` (rows, response_length) and zero
outside `response_mask`. An estimator declares the inputs it uses and absorbs the rest with
`**_`, so a user-registered one can do the same. This module holds the token-level estimators
(`gae`, `reinforce_plus_plus`, `remax`); the group-baseline ones live in `group_advantages`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

from kuberl_runtime.algorithms.groups import GroupIndex
from kuberl_runtime.algorithms.masked import masked_whiten
from kuberl_runtime.algorithms.registry import Registry

T = TypeVar("T")

AdvantageEstimator = Callable[..., tuple[torch.Tensor, torch.Tensor]]

ADVANTAGE_ESTIMATORS: Registry[AdvantageEstimator] = Registry("advantage estimator")


def register_advantage_estimator(*names: str) -> Callable[[AdvantageEstimator], AdvantageEstimator]:
    """Decorator: make an estimator selectable as `algorithm.adv_estimator: <name>`."""
    return ADVANTAGE_ESTIMATORS.register(*names)


def get_advantage_estimator(name: str) -> AdvantageEstimator:
    """The estimator registered as `name`; UnknownAlgorithmError lists the known names."""
    return ADVANTAGE_ESTIMATORS.get(name)


def compute_advantage(
    adv_estimator: str,
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIndex | None = None,
    values: torch.Tensor | None = None,
    reward_baselines: torch.Tensor | None = None,
    gamma: float = 1.0,
    lam: float = 1.0,
    norm_adv_by_std_in_grpo: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the estimator named `adv_estimator` with the uniform inputs.

    token_level_rewards: (rows, L) rewards per response token (scores minus in-reward KL).
    response_mask: (rows, L) 1 on response tokens, 0 on padding.
    index: per-row prompt uid (int tensor or a sequence of hashables), for group estimators.
    values: (rows, L) critic values, for `gae`.
    reward_baselines: (rows,) scores of greedy responses, for `remax`.
    """
    estimator = get_advantage_estimator(adv_estimator)
    return estimator(
        token_level_rewards=token_level_rewards,
        response_mask=response_mask,
        index=index,
        values=values,
        reward_baselines=reward_baselines,
        gamma=gamma,
        lam=lam,
        norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
    )


def require(value: T | None, what: str, estimator: str) -> T:
    """The input an estimator cannot work without, or a ValueError saying who needs it."""
    if value is None:
        raise ValueError(f"adv_estimator={estimator!r} needs {what}, but none was given")
    return value


def zero_outside(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Zero every non-response position (where, not multiply: padding may hold NaN)."""
    return torch.where(response_mask.bool(), values, torch.zeros((), dtype=values.dtype))


@register_advantage_estimator("gae")
def gae_advantage(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    values: torch.Tensor | None = None,
    gamma: float = 1.0,
    lam: float = 1.0,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation; advantages are whitened over the whole batch.

    Backward over t with V_next = A_next = 0: δ_t = r_t + γ·V_next − V_t, A_t = δ_t + γλ·A_next.
    Non-response positions carry V_next and A_next through unchanged, so a masked-out span (e.g.
    tool output between turns) does not break the recursion. returns = A + V (before whitening).
    """
    values = require(values, "critic values", "gae")
    keep = response_mask.bool()
    num_rows, length = token_level_rewards.shape
    next_value = token_level_rewards.new_zeros(num_rows)
    next_adv = token_level_rewards.new_zeros(num_rows)
    raw = torch.empty_like(token_level_rewards)
    for t in reversed(range(length)):
        delta = token_level_rewards[:, t] + gamma * next_value - values[:, t]
        adv_t = delta + gamma * lam * next_adv
        next_value = torch.where(keep[:, t], values[:, t], next_value)
        next_adv = torch.where(keep[:, t], adv_t, next_adv)
        raw[:, t] = next_adv
    returns = zero_outside(raw + values, response_mask)
    advantages = zero_outside(masked_whiten(raw, response_mask), response_mask)
    return advantages, returns


@register_advantage_estimator("reinforce_plus_plus")
def reinforce_plus_plus_advantage(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    gamma: float = 1.0,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """REINFORCE++: discounted return-to-go G_t = r_t + γ·G_{t+1}, whitened over the batch.

    As verl 0.9.1: a non-response position (an observation span inside a multi-turn response, or
    padding) is skipped — its reward is not added and the running return is carried past it
    unchanged, so rewards propagate across masked gaps. No baseline.
    """
    keep = response_mask.bool()
    running = token_level_rewards.new_zeros(token_level_rewards.shape[0])
    returns = torch.zeros_like(token_level_rewards)
    for t in reversed(range(token_level_rewards.shape[1])):
        updated = token_level_rewards[:, t] + gamma * running
        running = torch.where(keep[:, t], updated, running)
        returns[:, t] = running
    returns = zero_outside(returns, response_mask)
    advantages = zero_outside(masked_whiten(returns, response_mask), response_mask)
    return advantages, returns


@register_advantage_estimator("remax")
def remax_advantage(
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    reward_baselines: torch.Tensor | None = None,
    **_: object,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ReMax: undiscounted return-to-go minus the greedy response's score b_i (no whitening)."""
    baselines = require(reward_baselines, "reward_baselines (greedy-response scores)", "remax")
    kept = zero_outside(token_level_rewards, response_mask)
    returns = zero_outside(kept.flip(-1).cumsum(-1).flip(-1), response_mask)
    advantages = zero_outside(returns - baselines.to(returns.dtype).unsqueeze(-1), response_mask)
    return advantages, returns
