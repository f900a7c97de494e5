"""ROLL's RLVR reward and advantage options, with ROLL's semantics (alibaba/ROLL, rlvr pipeline).

Off unless set (`algorithm.reward_clip`, `advantage_clip`, `norm_mean_type`, `norm_std_type`,
`max_len_mask`, `difficulty_mask` + thresholds). Order, as ROLL runs it per step:

1. sample mask from the raw scores: `max_len_mask` drops responses that hit the response length
   (truncated); `difficulty_mask` drops every response of a prompt whose mean score is not
   strictly between the two thresholds (prompts sampled once are kept);
2. response-level scores normalised (`norm_mean_type`/`norm_std_type`: batch | group | none,
   unbiased std, (r − μ)/(σ + 1e-6)) over all responses, masked ones included; ROLL forces
   group/group for `grpo`; then clipped to ±`reward_clip`;
3. after the in-reward KL, token-level rewards clipped to ±`reward_clip` again;
4. advantages over the surviving responses (masked rows: zero advantage, out of whitening and
   out of the loss); then clipped to ±`advantage_clip`. With no response left the step is
   skipped (zero advantages, empty final mask; the trainer makes no update), as ROLL does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from kuberl_runtime.algorithms.advantages import compute_advantage, zero_outside
from kuberl_runtime.algorithms.groups import GroupIndex, group_ids, group_mean, group_sizes
from kuberl_runtime.algorithms.masked import masked_sum

NormType = Literal["batch", "group"]
# ROLL's epsilon in the std divisor of reward normalisation.
NORM_EPS = 1e-6
# Estimators whose statistics are per prompt group: they see every sampled response (ROLL
# normalises rewards before masking) and masked rows are zeroed afterwards.
GROUP_ESTIMATORS = ("grpo",)
SUPPORTED_ESTIMATORS = ("gae", "grpo", "reinforce_plus_plus")


@dataclass(frozen=True)
class RollRLVROptions:
    reward_clip: float | None = None
    advantage_clip: float | None = None
    norm_mean_type: NormType | None = None
    norm_std_type: NormType | None = None
    max_len_mask: bool = False
    difficulty_mask: bool = False
    difficulty_low_threshold: float = 0.0
    difficulty_high_threshold: float = 1.0

    @classmethod
    def from_settings(
        cls,
        *,
        reward_clip: float,
        advantage_clip: float,
        norm_mean_type: str,
        norm_std_type: str,
        max_len_mask: bool,
        difficulty_mask: bool,
        difficulty_low_threshold: float,
        difficulty_high_threshold: float,
    ) -> RollRLVROptions:
        """From the run plan's `algorithm.roll_rlvr` (0 = no clip, "none" = no normalisation)."""
        return cls(
            reward_clip=reward_clip or None,
            advantage_clip=advantage_clip or None,
            norm_mean_type=_norm_type(norm_mean_type),
            norm_std_type=_norm_type(norm_std_type),
            max_len_mask=max_len_mask,
            difficulty_mask=difficulty_mask,
            difficulty_low_threshold=difficulty_low_threshold,
            difficulty_high_threshold=difficulty_high_threshold,
        )

    @property
    def active(self) -> bool:
        return self != RollRLVROptions()

    def norm_types(self, adv_estimator: str) -> tuple[NormType | None, NormType | None]:
        return (
            ("group", "group")
            if adv_estimator == "grpo"
            else (
                self.norm_mean_type,
                self.norm_std_type,
            )
        )


@dataclass(frozen=True)
class ShapedScores:
    token_level_scores: torch.Tensor
    sample_mask: torch.Tensor
    """(rows,) bool: responses that stay in the advantage and the loss."""
    metrics: dict[str, float]


def clip_fraction(values: torch.Tensor, bound: float) -> float:
    """Share of all elements outside ±bound (ROLL counts every element, padding included)."""
    return float(((values > bound) | (values < -bound)).sum().item()) / max(values.numel(), 1)


def normalize_scores(
    scores: torch.Tensor,
    index: GroupIndex,
    mean_type: NormType | None,
    std_type: NormType | None,
) -> torch.Tensor:
    """ROLL's `reward_norm` on one score per response (groups by prompt uid)."""
    ids, num_groups = group_ids(index, scores.device)
    if std_type == "group" and bool((group_sizes(ids, num_groups) < 2).any()):
        raise ValueError(
            "norm_std_type: group needs at least 2 responses per prompt (ROLL divides by a "
            "group's std, which one response does not have); raise rollout.n"
        )
    mean = torch.zeros_like(scores)
    if mean_type == "batch":
        mean = scores.mean().expand_as(scores)
    elif mean_type == "group":
        mean = group_mean(scores, ids, num_groups)[ids]
    centered = scores - mean
    if std_type is None:
        return centered
    if std_type == "batch":
        std = scores.std().expand_as(scores)
    else:
        group_centered = scores - group_mean(scores, ids, num_groups)[ids]
        sums = torch.zeros(num_groups, dtype=scores.dtype).index_add_(0, ids, group_centered**2)
        sizes = group_sizes(ids, num_groups).to(scores.dtype)
        std = torch.sqrt(sums / (sizes - 1))[ids]
    return centered / (std + NORM_EPS)


def sample_mask(
    scores: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIndex,
    max_response_length: int,
    options: RollRLVROptions,
) -> tuple[torch.Tensor, dict[str, float]]:
    """(rows,) bool mask of the responses ROLL keeps, and ROLL's mask metrics."""
    keep = torch.ones(scores.shape[0], dtype=torch.bool, device=scores.device)
    metrics = {"actor/max_len_mask_ratio": 1.0, "actor/difficulty_mask_ratio": 1.0}
    if options.max_len_mask:
        not_truncated = response_mask.sum(-1) != max_response_length
        keep &= not_truncated
        metrics["actor/max_len_mask_ratio"] = float(not_truncated.float().mean().item())
    if options.difficulty_mask:
        ids, num_groups = group_ids(index, scores.device)
        mean = group_mean(scores, ids, num_groups)[ids]
        in_band = (mean > options.difficulty_low_threshold) & (
            mean < options.difficulty_high_threshold
        )
        in_band |= (group_sizes(ids, num_groups) == 1)[ids]
        keep &= in_band
        metrics["actor/difficulty_mask_ratio"] = float(in_band.float().mean().item())
    metrics["actor/final_mask_ratio"] = float(keep.float().mean().item())
    metrics["actor/samples_used"] = float(keep.sum().item())
    metrics["actor/samples_total"] = float(scores.shape[0])
    return keep, metrics


def shape_scores(
    token_level_scores: torch.Tensor,
    response_mask: torch.Tensor,
    index: GroupIndex,
    max_response_length: int,
    adv_estimator: str,
    options: RollRLVROptions,
) -> ShapedScores:
    """Steps 1–2: the sample mask, then normalised and clipped scores on the same tokens."""
    scores = masked_sum(token_level_scores, response_mask, dim=-1)
    keep, metrics = sample_mask(scores, response_mask, index, max_response_length, options)
    shaped = normalize_scores(scores, index, *options.norm_types(adv_estimator))
    metrics["critic/reward_clip_frac"] = 0.0
    if options.reward_clip is not None:
        metrics["critic/reward_clip_frac"] = clip_fraction(shaped, options.reward_clip)
        shaped = shaped.clamp(-options.reward_clip, options.reward_clip)
    # The score sits on one token per row (the last valid one); move the new value there.
    placed = torch.zeros_like(token_level_scores)
    last = _last_valid(response_mask)
    has_tokens = response_mask.bool().any(-1)
    rows = torch.arange(scores.shape[0], device=scores.device)[has_tokens]
    placed[rows, last[has_tokens]] = shaped[has_tokens].to(placed.dtype)
    return ShapedScores(placed, keep, metrics)


def roll_advantages(
    adv_estimator: str,
    *,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    sample_keep: torch.Tensor,
    options: RollRLVROptions,
    **estimator_kwargs: object,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, float]]:
    """Steps 3–4: (advantages, returns, final response mask, metrics)."""
    final_mask = response_mask * sample_keep.unsqueeze(-1).to(response_mask.dtype)
    metrics = {"mask/final_mask_sum_eq_0": float(not bool(final_mask.bool().any()))}
    if metrics["mask/final_mask_sum_eq_0"]:
        # ROLL skips such a step (no update); the trainer does the same on an empty final mask.
        zeros = torch.zeros_like(token_level_rewards)
        return zeros, zeros, final_mask, metrics
    if options.reward_clip is not None:
        metrics["critic/token_reward_clip_frac"] = clip_fraction(
            token_level_rewards, options.reward_clip
        )
        token_level_rewards = token_level_rewards.clamp(-options.reward_clip, options.reward_clip)
    estimator_mask = response_mask if adv_estimator in GROUP_ESTIMATORS else final_mask
    advantages, returns = compute_advantage(
        adv_estimator,
        token_level_rewards=token_level_rewards,
        response_mask=estimator_mask,
        **estimator_kwargs,  # type: ignore[arg-type]
    )
    advantages = zero_outside(advantages, final_mask)
    returns = zero_outside(returns, final_mask)
    if options.advantage_clip is not None:
        metrics["critic/advantage_clip_frac"] = clip_fraction(advantages, options.advantage_clip)
        advantages = advantages.clamp(-options.advantage_clip, options.advantage_clip)
    return advantages, returns, final_mask, metrics


def _norm_type(value: str) -> NormType | None:
    if value == "none":
        return None
    if value not in ("batch", "group"):
        raise ValueError(f"norm type must be batch, group or none, got {value!r}")
    return "batch" if value == "batch" else "group"


def _last_valid(response_mask: torch.Tensor) -> torch.Tensor:
    positions = torch.arange(response_mask.shape[-1], device=response_mask.device)
    return torch.where(response_mask.bool(), positions, -1).amax(-1)
