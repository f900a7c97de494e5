"""Token entropy of the policy from its logits, chunked over rows in forward and backward.

H_t = logsumexp(z) − Σ_v softmax(z)_v·z_v = −Σ_v p_v·log p_v, with z = logits / temperature
already applied by the caller. A plain chunked loop under autograd would still keep every chunk's
softmax alive for backward (a full rows × vocab copy); the custom Function below saves only the
logits it was given plus one float per row, and recomputes each chunk's softmax in backward.
"""

from __future__ import annotations

import torch

from kuberl_runtime.algorithms.chunked import DEFAULT_CHUNK_ROWS, as_rows, compute_dtype, row_slices


class _ChunkedEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, chunk_size: int) -> torch.Tensor:  # type: ignore[override]
        dtype = compute_dtype(logits)
        entropy = torch.empty(logits.shape[0], dtype=dtype, device=logits.device)
        for rows in row_slices(logits.shape[0], chunk_size):
            log_probs = torch.log_softmax(logits[rows].to(dtype), dim=-1)
            entropy[rows] = -(log_probs.exp() * log_probs).sum(-1)
        ctx.save_for_backward(logits, entropy)
        ctx.chunk_size = chunk_size
        return entropy

    @staticmethod
    def backward(ctx, grad_entropy: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        logits, entropy = ctx.saved_tensors
        grad_logits = torch.empty_like(logits)
        for rows in row_slices(logits.shape[0], ctx.chunk_size):
            log_probs = torch.log_softmax(logits[rows].to(entropy.dtype), dim=-1)
            # ∂H/∂z_v = −p_v·(log p_v + H)
            local = -log_probs.exp() * (log_probs + entropy[rows, None])
            grad_logits[rows] = (local * grad_entropy[rows, None]).to(grad_logits.dtype)
        return grad_logits, None


def entropy_from_logits(
    logits: torch.Tensor, *, chunk_size: int = DEFAULT_CHUNK_ROWS
) -> torch.Tensor:
    """Entropy per position of (..., V) logits, shaped (...); float32 (float64 for float64 input).

    Memory beyond the inputs and outputs stays O(chunk_size × V) in forward and backward.
    """
    entropy = _ChunkedEntropy.apply(as_rows(logits), chunk_size)
    return entropy.reshape(logits.shape[:-1])
