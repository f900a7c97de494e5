"""The diagnostics verl 0.9.1 logs for rollout correction (without the `rollout_corr/` prefix).

* `offpolicy_metrics`: the trainer/rollout mismatch: `kl` (E[log π_rollout − log π_train]),
  `k3_kl`, both policies' perplexities (per-row exp(−mean log-prob), averaged over rows) and their
  logs, `log_ppl_diff*`, `ppl_ratio`, χ² at token (E[r²] − 1) and sequence level.
* `is_metrics`: statistics of the applied IS weights (`rollout_is_*`: mean, max, min, std,
  effective sample size, fractions beyond the bounds, per-row summaries).
* `rs_option_metrics`: one rejection option's statistic (`rollout_rs_<option>_*`).
"""

from __future__ import annotations

import math

import torch

from kuberl_runtime.algorithms.masked import masked_mean, masked_sum

# log-ratios are clamped to ±20 before exp: exp(20) ≈ 4.9e8 keeps every weight finite.
SAFETY_BOUND = 20.0
_ESS_EPS = 1e-8


def offpolicy_metrics(
    train_log_prob: torch.Tensor, rollout_log_prob: torch.Tensor, mask: torch.Tensor
) -> dict[str, float]:
    train_row = masked_mean(train_log_prob, mask, dim=-1)
    rollout_row = masked_mean(rollout_log_prob, mask, dim=-1)
    log_ratio = train_log_prob - rollout_log_prob
    ppl_diff = rollout_row - train_row
    rho = log_ratio.clamp(-SAFETY_BOUND, SAFETY_BOUND).exp()
    row_log_ratio = masked_sum(log_ratio, mask, dim=-1).clamp(-SAFETY_BOUND, SAFETY_BOUND)
    return {
        "training_ppl": (-train_row).exp().mean().item(),
        "training_log_ppl": (-train_row).mean().item(),
        "kl": masked_mean(rollout_log_prob - train_log_prob, mask).item(),
        "k3_kl": masked_mean(log_ratio.exp() - log_ratio - 1, mask).item(),
        "rollout_ppl": (-rollout_row).exp().mean().item(),
        "rollout_log_ppl": (-rollout_row).mean().item(),
        "log_ppl_diff": ppl_diff.mean().item(),
        "log_ppl_abs_diff": ppl_diff.abs().mean().item(),
        "log_ppl_diff_max": ppl_diff.max().item(),
        "log_ppl_diff_min": ppl_diff.min().item(),
        "ppl_ratio": ppl_diff.exp().mean().item(),
        "chi2_token": (masked_mean(rho.square(), mask) - 1.0).item(),
        "chi2_seq": ((2.0 * row_log_ratio).exp().mean() - 1.0).item(),
    }


def is_metrics(
    weights: torch.Tensor,
    raw: torch.Tensor,
    log_ratio_for_metrics: torch.Tensor,
    mask: torch.Tensor,
    *,
    level: str,
    upper: float,
    lower: float | None,
) -> dict[str, float]:
    """`weights` applied, `raw` before truncation (both (rows, L), 0 off the mask); the log-ratio
    per token, or per row ((rows, 1)) at sequence level. `lower` None: 1 / upper for fractions."""
    lower = 1.0 / upper if lower is None else lower
    valid = mask.bool()
    metrics: dict[str, float] = {"rollout_is_mean": masked_mean(weights, mask).item()}
    if level == "sequence":
        top = log_ratio_for_metrics.max().clamp(max=SAFETY_BOUND)
        metrics["rollout_is_max"] = top.exp().item()
        metrics["rollout_is_min"] = log_ratio_for_metrics.min().exp().item()
        high = (log_ratio_for_metrics > math.log(upper)).float().mean()
        low = (log_ratio_for_metrics < math.log(lower)).float().mean()
    else:
        high = masked_mean((raw > upper).float(), mask)
        low = masked_mean((raw < lower).float(), mask)
        metrics["rollout_is_max"] = weights.masked_fill(~valid, float("-inf")).max().item()
        metrics["rollout_is_min"] = weights.masked_fill(~valid, float("inf")).min().item()
    metrics["rollout_is_ratio_fraction_high"] = high.item()
    metrics["rollout_is_ratio_fraction_low"] = low.item()
    bounded = weights.clamp(min=0.0, max=upper)
    metrics["rollout_is_std"] = _clamped_std(bounded, mask)
    normalized = bounded / (masked_mean(bounded, mask) + _ESS_EPS)
    # Every weight zeroed (IcePop): no effective sample (verl divides by zero there).
    second_moment = masked_mean(normalized.square(), mask).item()
    metrics["rollout_is_eff_sample_size"] = 1.0 / second_moment if second_moment else 0.0
    metrics.update(_row_weight_metrics(weights, raw, mask, upper, lower))
    return metrics


def _clamped_std(values: torch.Tensor, mask: torch.Tensor) -> float:
    """√(E[x²] − E[x]²) over the mask (0 for fewer than two tokens)."""
    if mask.sum() <= 1:
        return 0.0
    mean = masked_mean(values, mask)
    variance = masked_mean(values.square(), mask) - mean.square()
    return variance.clamp(min=0.0).sqrt().item()


def _row_weight_metrics(
    weights: torch.Tensor, raw: torch.Tensor, mask: torch.Tensor, upper: float, lower: float
) -> dict[str, float]:
    per_row = masked_mean(weights, mask, dim=-1)
    raw_per_row = masked_mean(raw, mask, dim=-1)
    return {
        "rollout_is_seq_mean": per_row.mean().item(),
        "rollout_is_seq_std": per_row.std().item() if per_row.numel() > 1 else 0.0,
        "rollout_is_seq_max": per_row.max().item(),
        "rollout_is_seq_min": per_row.min().item(),
        "rollout_is_seq_max_deviation": (per_row - 1.0).abs().max().item(),
        "rollout_is_seq_fraction_high": (raw_per_row > upper).float().mean().item(),
        "rollout_is_seq_fraction_low": (raw_per_row < lower).float().mean().item(),
    }


def rs_option_metrics(
    option: str,
    token_stat: torch.Tensor,
    mask: torch.Tensor,
    row_has_tokens: torch.Tensor,
    row_stat: torch.Tensor | None,
    upper: float,
    lower: float,
    two_sided: bool,
) -> dict[str, float]:
    """`token_stat` (rows, L); `row_stat` (rows,) for sequence options, None for token ones;
    `upper`/`lower` in the statistic's units (log ratio for k1, whose `two_sided` is True)."""
    prefix = f"rollout_rs_{option}"
    valid = mask.bool()
    sequence = row_stat is not None
    rows = row_stat if sequence else masked_mean(token_stat, mask, dim=-1)
    rows = rows[row_has_tokens]
    metrics = {f"{prefix}_mean": masked_mean(token_stat, mask).item()}
    if sequence and rows.numel() > 0:
        metrics[f"{prefix}_max"] = rows.max().item()
        metrics[f"{prefix}_min"] = rows.min().item()
        high = (rows > upper).float().mean().item()
        low = (rows < lower).float().mean().item() if two_sided else 0.0
    else:
        metrics[f"{prefix}_max"] = token_stat.masked_fill(~valid, float("-inf")).max().item()
        metrics[f"{prefix}_min"] = token_stat.masked_fill(~valid, float("inf")).min().item()
        high = masked_mean((token_stat > upper).float(), mask).item()
        low = masked_mean((token_stat < lower).float(), mask).item() if two_sided else 0.0
    metrics[f"{prefix}_fraction_high"] = high
    metrics[f"{prefix}_fraction_low"] = low
    floor = lower if two_sided else 0.0
    metrics[f"{prefix}_std"] = _clamped_std(token_stat.clamp(min=floor, max=upper), mask)
    metrics.update(_row_stat_metrics(prefix, rows, upper, lower, two_sided))
    return metrics


def _row_stat_metrics(
    prefix: str, rows: torch.Tensor, upper: float, lower: float, two_sided: bool
) -> dict[str, float]:
    names = ("seq_mean", "seq_std", "seq_max", "seq_min", "seq_max_deviation")
    if rows.numel() == 0:
        empty = {f"{prefix}_{name}": 0.0 for name in names}
        return {**empty, f"{prefix}_seq_fraction_high": 0.0, f"{prefix}_seq_fraction_low": 0.0}
    metrics = {
        f"{prefix}_seq_mean": rows.mean().item(),
        f"{prefix}_seq_std": rows.std().item() if rows.numel() > 1 else 0.0,
        f"{prefix}_seq_max": rows.max().item(),
        f"{prefix}_seq_min": rows.min().item(),
        f"{prefix}_seq_max_deviation": rows.abs().max().item(),
        f"{prefix}_seq_fraction_high": (rows > upper).float().mean().item(),
    }
    if two_sided:
        metrics[f"{prefix}_seq_fraction_low"] = (rows < lower).float().mean().item()
    return metrics
