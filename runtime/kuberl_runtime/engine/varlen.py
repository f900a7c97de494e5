"""Packed sequences on CUDA without flash-attn: PyTorch's own FlashAttention-2 varlen kernel.

verl runs packed (`use_remove_padding`) micro-batches through flash-attn's varlen kernel, and so
does the runtime where flash-attn is installed (`flash_attention_2`). PyTorch ships the same
algorithm as `aten._flash_attention_forward`, with `cu_seqlens` and a backward, on CUDA. Where
flash-attn is missing, packed forwards on CUDA run it (`TORCH_VARLEN`, registered with
transformers' attention interface): each packed sequence attends within itself, found from its
restarting position ids, with flash's memory and FLOPs — never SDPA's dense T × T block-diagonal
mask. The dry run (`dryrun/packed.py`) calls the same kernel on fake tensors.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

TORCH_VARLEN = "kuberl_torch_varlen"  # no "flash" in it: transformers would look for flash-attn
_FLASH_DTYPES = (torch.float16, torch.bfloat16)


def cu_seqlens_of(position_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(cu_seqlens int32, longest length) of the sequences packed in one row of position ids.

    A sequence starts wherever the position id is 0 (packing restarts them per sequence).
    """
    flat = position_ids.reshape(-1)
    starts = torch.nonzero(flat == 0).flatten()
    if starts.numel() == 0 or int(starts[0]) != 0:
        raise ValueError("packed position ids must start every sequence at 0")
    total = torch.tensor([flat.numel()], device=flat.device)
    cu_seqlens = torch.cat([starts, total]).to(torch.int32)
    return cu_seqlens, int(cu_seqlens.diff().max())


def flash_varlen(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    *,
    dropout: float = 0.0,
    scaling: float | None = None,
) -> torch.Tensor:
    """Causal attention within each sequence: (B, H, T, D) in, (B, T, H, D) out.

    Key and value may have fewer heads (grouped-query attention). The B × T tokens are one
    stream cut at `cu_seqlens`. fp32 inputs run in bf16, as transformers' `flash_attention_2`
    does (flash kernels take half precision only).
    """
    batch, heads, length, dim = query.shape
    total = batch * length
    dtype = query.dtype

    def tokens_first(t: torch.Tensor) -> torch.Tensor:
        t = t.transpose(1, 2).reshape(total, t.shape[1], dim)
        return t if t.dtype in _FLASH_DTYPES else t.to(torch.bfloat16)

    out = torch.ops.aten._flash_attention_forward(
        tokens_first(query),
        tokens_first(key),
        tokens_first(value),
        cu_seqlens,
        cu_seqlens,
        max_seqlen,
        max_seqlen,
        dropout,
        True,  # causal
        False,  # no debug mask
        scale=scaling,
    )[0]
    return out.view(batch, length, heads, dim).to(dtype)


def torch_varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature for one packed row (no padding mask, no KV cache)."""
    position_ids = kwargs.get("position_ids")
    assert attention_mask is None and position_ids is not None and query.shape[0] == 1, (
        f"{TORCH_VARLEN} serves packed forwards only (one row, position ids, no mask)"
    )
    cu_seqlens, longest = cu_seqlens_of(position_ids)
    out = flash_varlen(query, key, value, cu_seqlens, longest, dropout=dropout, scaling=scaling)
    return out, None


def register() -> str:
    """Make `TORCH_VARLEN` a name transformers accepts as `attn_implementation` (idempotent)."""
    AttentionInterface.register(TORCH_VARLEN, torch_varlen_attention)
    AttentionMaskInterface.register(TORCH_VARLEN, flash_attention_mask)
    return TORCH_VARLEN
