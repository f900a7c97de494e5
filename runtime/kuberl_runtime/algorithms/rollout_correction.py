"""Rollout correction (verl 0.9.1 `algorithm.rollout_correction`): the rollout engine's log-probs
π_rollout against the trainer's π_train, as importance-sampling weights and rejection masks.

log r = log π_train − log π_rollout per response token (clamped to ±20 before any exp).

* IS weights (`ISSpec`): token level w_t = exp(log r_t); sequence level one weight per row,
  exp(Σ_t log r_t), on every token of the row. With only an upper bound the weights are truncated
  (TIS, w ≤ upper); with a lower bound too, weights outside [lower, upper] become 0 (IcePop).
  Optionally divided by their batch mean (token: over tokens; sequence: over rows with tokens).
  Always detached: they change the measure, not the objective.
* Rejection (`RSSpec`, any number, all must pass): a statistic per token or per row from the
  divergences k1 = −log r, k2 = ½(log r)², k3 = r − 1 − log r (token, or the row's sum, mean,
  max); k1 keeps log(lower) ≤ stat ≤ log(upper), k2/k3 keep stat ≤ upper. A rejected token (a
  whole row for sequence options) leaves the response mask.

Metrics carry verl's names under `rollout_corr/` (`rollout_correction_metrics.py`). The math
equals verl 0.9.1's `rollout_corr_helper` (tests/runtime/algorithms/test_verl_parity_rollout_corr).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kuberl_runtime.algorithms.masked import masked_mean, masked_sum
from kuberl_runtime.algorithms.rollout_correction_metrics import (
    SAFETY_BOUND,
    is_metrics,
    offpolicy_metrics,
    rs_option_metrics,
)

PREFIX = "rollout_corr/"
TOKEN_RS_OPTIONS = ("token_k1", "token_k2", "token_k3")
RS_OPTIONS = (
    *TOKEN_RS_OPTIONS,
    *(f"seq_{agg}_k{k}" for agg in ("sum", "mean") for k in (1, 2, 3)),
    "seq_max_k2",
    "seq_max_k3",
)
# A batch-normalised mean at or below this leaves the weights as they are (factor 1).
_NORMALIZE_FLOOR = 1e-8


@dataclass(frozen=True)
class ISSpec:
    level: str
    """"token" or "sequence"."""
    upper: float
    lower: float = 0.0
    """0: truncate at `upper` (TIS); > 0: zero the weights outside [lower, upper] (IcePop)."""
    batch_normalize: bool = False


@dataclass(frozen=True)
class RSSpec:
    option: str
    """One of RS_OPTIONS."""
    upper: float
    lower: float = 0.0
    """k1 options only: the ratio bounds [lower, upper] (compared in log space)."""

    @property
    def is_k1(self) -> bool:
        return self.option.endswith("k1")


@dataclass(frozen=True)
class Correction:
    weights: torch.Tensor | None
    """(rows, L) detached IS weights, 0 outside the response mask; None without IS."""
    response_mask: torch.Tensor
    """The response mask with rejected tokens removed (the input mask without rejection)."""
    metrics: dict[str, float]


def rollout_correction(
    train_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    importance: ISSpec | None,
    rejection: tuple[RSSpec, ...] = (),
) -> Correction:
    """IS weights, rejection mask and the off-policy metrics for one batch (verl's
    `compute_rollout_correction_and_rejection_mask`)."""
    if not bool(response_mask.any()):
        raise ValueError("rollout correction needs at least one response token in the batch")
    if not train_log_prob.shape == rollout_log_prob.shape == response_mask.shape:
        raise ValueError(
            f"log-prob shapes differ: trainer {tuple(train_log_prob.shape)}, rollout "
            f"{tuple(rollout_log_prob.shape)}, response mask {tuple(response_mask.shape)}"
        )
    log_ratio = train_log_prob - rollout_log_prob
    metrics: dict[str, float] = {}
    weights = None
    if importance is not None:
        weights, weight_metrics = is_weights(log_ratio, response_mask, importance)
        metrics.update(weight_metrics)
    mask = response_mask.clone()
    if rejection:
        mask, rs_metrics = rejection_mask(log_ratio, response_mask, rejection)
        metrics.update(rs_metrics)
    metrics.update(offpolicy_metrics(train_log_prob, rollout_log_prob, response_mask))
    return Correction(weights, mask, {PREFIX + k: v for k, v in metrics.items()})


def is_weights(
    log_ratio: torch.Tensor, mask: torch.Tensor, spec: ISSpec
) -> tuple[torch.Tensor, dict[str, float]]:
    """(rows, L) IS weights and their `rollout_is_*` metrics (verl's
    `compute_rollout_correction_weights`)."""
    if spec.level == "token":
        log_ratio_for_metrics = log_ratio
        raw = log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND).exp()
    elif spec.level == "sequence":
        log_ratio_for_metrics = masked_sum(log_ratio, mask, dim=-1).unsqueeze(-1)
        raw = log_ratio_for_metrics.clamp(-SAFETY_BOUND, SAFETY_BOUND).exp().expand_as(log_ratio)
    else:
        raise ValueError(f"rollout_is must be token or sequence, got {spec.level!r}")
    raw = raw * mask
    icepop = spec.lower > 0
    if icepop:
        kept = (raw >= spec.lower) & (raw <= spec.upper)
        weights = torch.where(kept, raw, torch.zeros_like(raw))
    else:
        weights = raw.clamp(max=spec.upper)
    metrics = is_metrics(
        weights,
        raw,
        log_ratio_for_metrics,
        mask,
        level=spec.level,
        upper=spec.upper,
        lower=spec.lower if icepop else None,
    )
    if icepop:
        outside = (raw < spec.lower) | (raw > spec.upper)
        metrics["rollout_is_oob_ratio"] = masked_mean(outside.float(), mask).item()
    weights = weights.detach()
    if spec.batch_normalize:
        weights, metrics["rollout_is_batch_norm_factor"] = _normalized(weights, mask, spec.level)
    return weights, metrics


def _normalized(
    weights: torch.Tensor, mask: torch.Tensor, level: str
) -> tuple[torch.Tensor, float]:
    """The weights over their batch mean (tokens, or rows with tokens), and that mean."""
    if level == "token":
        mean = masked_mean(weights, mask)
    else:
        per_row = masked_mean(weights, mask, dim=-1)
        has_tokens = (mask.sum(-1) > 0).to(weights.dtype)
        mean = (per_row * has_tokens).sum() / has_tokens.sum().clamp_min(_NORMALIZE_FLOOR)
    if mean > _NORMALIZE_FLOOR:
        return weights / mean, mean.item()
    return weights, 1.0


def rejection_mask(
    log_ratio: torch.Tensor, mask: torch.Tensor, specs: tuple[RSSpec, ...]
) -> tuple[torch.Tensor, dict[str, float]]:
    """The response mask without the tokens (rows) any option rejects, and the `rollout_rs_*`
    metrics (verl's `compute_rollout_rejection_mask`)."""
    if log_ratio.shape[0] == 0:
        return mask, {}
    safe = log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND)
    divergences = {"k1": -safe, "k2": 0.5 * safe**2, "k3": safe.exp() - 1.0 - safe}
    valid = mask.bool()
    row_has_tokens = mask.sum(-1) > 0
    combined = torch.ones_like(mask, dtype=log_ratio.dtype)
    metrics: dict[str, float] = {}
    for spec in _distinct(specs):
        token_stat, row_stat, keep = _option_statistic(spec, divergences, mask)
        upper = math.log(spec.upper) if spec.is_k1 else spec.upper
        lower = math.log(spec.lower) if spec.is_k1 else 0.0
        metrics.update(
            rs_option_metrics(
                spec.option, token_stat, mask, row_has_tokens, row_stat, upper, lower, spec.is_k1
            )
        )
        keep_float = keep.to(log_ratio.dtype)
        combined = combined * keep_float
        row_kept = (keep | ~valid).all(-1)
        metrics[f"rollout_rs_{spec.option}_masked_fraction"] = masked_mean(
            1 - keep_float, mask
        ).item()
        metrics[f"rollout_rs_{spec.option}_seq_masked_fraction"] = _fraction_of_rows(
            ~row_kept, row_has_tokens
        )
    metrics["rollout_rs_masked_fraction"] = masked_mean(1 - combined, mask).item()
    rejected_somewhere = (~((combined > 0.5) & valid) & valid).any(-1)
    metrics["rollout_rs_seq_masked_fraction"] = rejected_somewhere.float().mean().item()
    return (mask * combined).to(mask.dtype), metrics


def _distinct(specs: tuple[RSSpec, ...]) -> list[RSSpec]:
    """The first spec of each option, in order (verl drops repeated options)."""
    seen: dict[str, RSSpec] = {}
    for spec in specs:
        if spec.option not in RS_OPTIONS:
            raise ValueError(f"rollout_rs option {spec.option!r} is not one of {RS_OPTIONS}")
        seen.setdefault(spec.option, spec)
    return list(seen.values())


def _option_statistic(
    spec: RSSpec, divergences: dict[str, torch.Tensor], mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """(per-token statistic, per-row statistic or None, per-token keep) for one option."""
    level, _, kind = spec.option.rpartition("_")
    values = divergences[kind]
    if level == "token":
        return values, None, _within(values, spec)
    aggregate = level.removeprefix("seq_")
    if aggregate == "sum":
        row = masked_sum(values, mask, dim=-1)
    elif aggregate == "mean":
        row = masked_mean(values, mask, dim=-1)
    else:
        row = _masked_max(values, mask)
    keep = _within(row, spec).unsqueeze(-1).expand_as(mask)
    return row.unsqueeze(-1).expand_as(mask), row, keep


def _within(stat: torch.Tensor, spec: RSSpec) -> torch.Tensor:
    if spec.is_k1:
        return (stat >= math.log(spec.lower)) & (stat <= math.log(spec.upper))
    return stat <= spec.upper


def _masked_max(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each row's max over its tokens; 0 for a row without tokens."""
    neg_inf = torch.tensor(float("-inf"), dtype=values.dtype, device=values.device)
    best = values.masked_fill(~mask.bool(), neg_inf).max(dim=-1).values
    return torch.where(best == neg_inf, torch.zeros_like(best), best)


def _fraction_of_rows(rows: torch.Tensor, row_has_tokens: torch.Tensor) -> float:
    """Fraction of the rows with tokens for which `rows` holds (0 without such rows)."""
    counted = row_has_tokens.float()
    if counted.sum() == 0:
        return 0.0
    return ((rows.float() * counted).sum() / counted.sum()).item()
