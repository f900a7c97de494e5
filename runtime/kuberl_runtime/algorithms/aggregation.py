"""`agg_loss`: reduce a per-token loss matrix to a scalar the way `loss_agg_mode` says.

Statistics are over the micro-batch handed in (verl's legacy worker, dp_size = 1). Token and
sequence counts are clamped at 1, so an all-padding micro-batch gives 0 instead of NaN; with any
valid token the result is exact (verl adds 1e-8 to some of these denominators instead).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from kuberl_runtime.algorithms.masked import masked_sum

LOSS_AGG_MODES = (
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)


def _token_mean(loss_mat: torch.Tensor, loss_mask: torch.Tensor, _: float | None) -> torch.Tensor:
    return masked_sum(loss_mat, loss_mask) / loss_mask.sum().clamp(min=1)


def _seq_mean(per_seq: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Mean over the rows that have at least one valid token (fully padded rows do not count)."""
    has_tokens = loss_mask.sum(-1) > 0
    return masked_sum(per_seq, has_tokens) / has_tokens.sum().clamp(min=1)


def _seq_mean_token_sum(
    loss_mat: torch.Tensor, loss_mask: torch.Tensor, _: float | None
) -> torch.Tensor:
    return _seq_mean(masked_sum(loss_mat, loss_mask, dim=-1), loss_mask)


def _seq_mean_token_mean(
    loss_mat: torch.Tensor, loss_mask: torch.Tensor, _: float | None
) -> torch.Tensor:
    per_seq = masked_sum(loss_mat, loss_mask, dim=-1) / loss_mask.sum(-1).clamp(min=1)
    return _seq_mean(per_seq, loss_mask)


def _seq_mean_token_sum_norm(
    loss_mat: torch.Tensor, loss_mask: torch.Tensor, loss_scale_factor: float | None
) -> torch.Tensor:
    # Dr.GRPO: a constant divisor instead of each row's length. Like verl this sums over rows
    # (it does not divide by their count), and without loss_scale_factor the divisor is the padded
    # response length — so set loss_scale_factor (e.g. max_response_length) for a result that does
    # not depend on how the batch was padded.
    divisor = loss_mat.shape[-1] if loss_scale_factor is None else loss_scale_factor
    return masked_sum(loss_mat, loss_mask) / divisor


_AGGREGATORS: dict[str, Callable[[torch.Tensor, torch.Tensor, float | None], torch.Tensor]] = {
    "token-mean": _token_mean,
    "seq-mean-token-sum": _seq_mean_token_sum,
    "seq-mean-token-mean": _seq_mean_token_mean,
    "seq-mean-token-sum-norm": _seq_mean_token_sum_norm,
}


def agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str,
    loss_scale_factor: float | None = None,
) -> torch.Tensor:
    """Aggregate a (rows, L) loss matrix over the valid tokens of `loss_mask`.

    token-mean:              Σ_{i,t} m·X / Σ_{i,t} m
    seq-mean-token-sum:      (1/S) Σ_i Σ_t m·X            S = rows with any valid token
    seq-mean-token-mean:     (1/S) Σ_i (Σ_t m·X / Σ_t m)
    seq-mean-token-sum-norm: Σ_i Σ_t m·X / C             C = loss_scale_factor or L
    """
    try:
        aggregate = _AGGREGATORS[loss_agg_mode]
    except KeyError:
        raise ValueError(
            f"unknown loss_agg_mode {loss_agg_mode!r}; expected one of {', '.join(LOSS_AGG_MODES)}"
        ) from None
    return aggregate(loss_mat, loss_mask, loss_scale_factor)
