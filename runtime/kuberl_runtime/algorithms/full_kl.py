"""Exact per-token KL(π‖π_ref) over the whole vocabulary, chunked over rows.

KL_t = Σ_v p_v·(log p_v − log q_v) with p = softmax(logits), q = softmax(ref_logits). verl lists
`full` as a KL type but raises NotImplementedError; this is the real thing. Like the entropy, a
custom autograd Function keeps memory at O(chunk × vocab): forward saves only its inputs and one
float per row, backward recomputes each chunk's softmaxes.
"""

from __future__ import annotations

import torch

from kuberl_runtime.algorithms.chunked import DEFAULT_CHUNK_ROWS, as_rows, compute_dtype, row_slices


def _chunk_log_probs(
    logits: torch.Tensor, ref_logits: torch.Tensor, rows: slice, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.log_softmax(logits[rows].to(dtype), dim=-1),
        torch.log_softmax(ref_logits[rows].to(dtype), dim=-1),
    )


class _ChunkedFullKL(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx, logits: torch.Tensor, ref_logits: torch.Tensor, chunk_size: int
    ) -> torch.Tensor:
        dtype = compute_dtype(logits)
        kl = torch.empty(logits.shape[0], dtype=dtype, device=logits.device)
        for rows in row_slices(logits.shape[0], chunk_size):
            log_p, log_q = _chunk_log_probs(logits, ref_logits, rows, dtype)
            # Rounding can leave a near-zero KL a hair below 0; the true value never is.
            kl[rows] = (log_p.exp() * (log_p - log_q)).sum(-1).clamp(min=0)
        ctx.save_for_backward(logits, ref_logits, kl)
        ctx.chunk_size = chunk_size
        return kl

    @staticmethod
    def backward(  # type: ignore[override]
        ctx, grad_kl: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        logits, ref_logits, kl = ctx.saved_tensors
        want_policy, want_ref = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_logits = torch.empty_like(logits) if want_policy else None
        grad_ref = torch.empty_like(ref_logits) if want_ref else None
        for rows in row_slices(logits.shape[0], ctx.chunk_size):
            log_p, log_q = _chunk_log_probs(logits, ref_logits, rows, kl.dtype)
            p, upstream = log_p.exp(), grad_kl[rows, None]
            if grad_logits is not None:
                # ∂KL/∂z_v = p_v·(log p_v − log q_v − KL)
                local = p * (log_p - log_q - kl[rows, None])
                grad_logits[rows] = (local * upstream).to(grad_logits.dtype)
            if grad_ref is not None:
                # ∂KL/∂y_v = q_v − p_v
                grad_ref[rows] = ((log_q.exp() - p) * upstream).to(grad_ref.dtype)
        return grad_logits, grad_ref, None


def full_kl_from_logits(
    logits: torch.Tensor,
    ref_logits: torch.Tensor,
    *,
    chunk_size: int = DEFAULT_CHUNK_ROWS,
) -> torch.Tensor:
    """KL(softmax(logits) ‖ softmax(ref_logits)) per position of (..., V) inputs, shaped (...).

    Both logits must already be divided by the sampling temperature. The result is float32
    (float64 for float64 input); gradients flow to whichever inputs require them.
    """
    if logits.shape != ref_logits.shape:
        raise ValueError(
            f"full KL needs logits and ref_logits of one shape, got {tuple(logits.shape)} "
            f"and {tuple(ref_logits.shape)} (same tokens, same vocabulary)"
        )
    kl = _ChunkedFullKL.apply(as_rows(logits), as_rows(ref_logits), chunk_size)
    return kl.reshape(logits.shape[:-1])
