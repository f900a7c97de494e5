"""`agg_loss`: reduce a per-token loss matrix to a scalar the way `loss_agg_mode` says.

Two forms, both verl 0.9.1's `core_algos.agg_loss`:
  * local (no `GlobalBatch`): statistics over the micro-batch handed in;
  * global-batch (`GlobalBatch`, verl's engine workers): token and sequence counts of the whole
    mini-batch across data-parallel ranks, multiplied by `dp_size` (FSDP averages gradients over
    ranks), so the micro-batch losses of one mini-batch sum to the mini-batch loss.
One documented difference: a micro-batch without any valid token aggregates to 0 here where verl
divides 0 by 0 (NaN); with any valid token the numbers are verl's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kuberl_runtime.algorithms.masked import masked_sum

LOSS_AGG_MODES = (
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)

# verl's per-row epsilon in seq-mean-token-mean.
SEQ_TOKEN_MEAN_EPS = 1e-8


@dataclass(frozen=True)
class GlobalBatch:
    """Counts over the whole mini-batch (all ranks), for the global-batch form of `agg_loss`.

    batch_num_tokens: valid tokens in the mini-batch (token-mean); global_batch_size: rows in the
    mini-batch (seq-mean modes; verl passes ppo_mini_batch_size · rollout.n); dp_size: ranks.
    """

    dp_size: int = 1
    batch_num_tokens: float | None = None
    global_batch_size: float | None = None

    def __post_init__(self) -> None:
        if self.dp_size < 1:
            raise ValueError(f"dp_size must be ≥ 1, got {self.dp_size}")


LOCAL = GlobalBatch()


def _denominator(value: float | None, local: torch.Tensor, dp_size: int, what: str) -> torch.Tensor:
    if value is not None:
        return torch.as_tensor(value, dtype=local.dtype, device=local.device)
    if dp_size > 1:
        raise ValueError(f"the global {what} is required when dp_size > 1")
    return local.clamp(min=1)


def _seq_mean(per_seq: torch.Tensor, loss_mask: torch.Tensor, batch: GlobalBatch) -> torch.Tensor:
    """Σ over rows with ≥ 1 valid token, / their count (or the global batch size), × dp_size."""
    has_tokens = loss_mask.sum(-1) > 0
    count = has_tokens.sum().to(per_seq.dtype)
    rows = _denominator(batch.global_batch_size, count, batch.dp_size, "batch size")
    return masked_sum(per_seq, has_tokens) / rows * batch.dp_size


def agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
) -> torch.Tensor:
    """Aggregate a (rows, L) loss matrix over the valid tokens of `loss_mask`.

    token-mean:              Σ_{i,t} m·X / T · D          T = valid tokens (global:
                                                          batch_num_tokens)
    token-sum:               Σ_{i,t} m·X · D
    seq-mean-token-sum:      Σ_i Σ_t m·X / S · D          S = rows with a valid token (global:
                                                          global_batch_size)
    seq-mean-token-mean:     Σ_i (Σ_t m·X / (Σ_t m + 1e-8)) / S · D
    seq-mean-token-sum-norm: seq-mean-token-sum / C       C = loss_scale_factor or L
    D = dp_size (1 in the local form).
    """
    batch = global_batch or LOCAL
    mask = loss_mask.bool()
    if loss_agg_mode == "token-mean":
        tokens = mask.sum().to(loss_mat.dtype)
        denom = _denominator(batch.batch_num_tokens, tokens, batch.dp_size, "token count")
        return masked_sum(loss_mat, mask) / denom * batch.dp_size
    if loss_agg_mode == "token-sum":
        return masked_sum(loss_mat, mask) * batch.dp_size
    if loss_agg_mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
        loss = _seq_mean(masked_sum(loss_mat, mask, dim=-1), mask, batch)
        if loss_agg_mode == "seq-mean-token-sum-norm":
            loss = loss / (loss_mat.shape[-1] if loss_scale_factor is None else loss_scale_factor)
        return loss
    if loss_agg_mode == "seq-mean-token-mean":
        per_seq = masked_sum(loss_mat, mask, dim=-1) / (mask.sum(-1) + SEQ_TOKEN_MEAN_EPS)
        return _seq_mean(per_seq, mask, batch)
    raise ValueError(
        f"unknown loss_agg_mode {loss_agg_mode!r}; expected one of {', '.join(LOSS_AGG_MODES)}"
    )
