"""Masked reductions over response tokens: sum, mean, variance and whitening.

Masks are 0/1 (bool or numeric). Positions outside the mask never reach a result, even when they
hold NaN or inf: padding carries whatever the engine left there.
"""

from __future__ import annotations

import torch

# The reference's epsilon for masked means and whitening (verl `masked_mean`, `masked_whiten`).
MASKED_EPS = 1e-8


def masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Σ over positions where mask is set; over everything when dim is None."""
    kept = torch.where(mask.bool(), values, torch.zeros((), dtype=values.dtype))
    return kept.sum() if dim is None else kept.sum(dim)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Σ m·x / (Σ m + 1e-8), the reference's convention (an empty mask gives 0, not NaN)."""
    count = mask.sum() if dim is None else mask.sum(dim)
    return masked_sum(values, mask, dim) / (count + MASKED_EPS)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance over all masked positions, Bessel-corrected by N/(N−1) with N = Σ m.

    Raises ValueError when N ≤ 1 with `unbiased`: one token has no sample variance, and the
    reference refuses rather than divide by zero.
    """
    mean = masked_mean(values, mask)
    variance = masked_mean((values - mean) ** 2, mask)
    if not unbiased:
        return variance
    num_tokens = mask.sum()
    if num_tokens <= 1:
        raise ValueError(
            f"masked variance needs at least 2 valid tokens, got {int(num_tokens.item())}; "
            "the batch has (almost) no response tokens — check the response_mask"
        )
    return variance * num_tokens / (num_tokens - 1)


def masked_whiten(
    values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True
) -> torch.Tensor:
    """(x − μ)/√(σ² + 1e-8) with μ, σ² over every masked position of the whole batch.

    Applied to every position (the caller re-masks); with shift_mean=False the mean is added back.
    """
    mean = masked_mean(values, mask)
    whitened = (values - mean) * torch.rsqrt(masked_var(values, mask) + MASKED_EPS)
    return whitened if shift_mean else whitened + mean
