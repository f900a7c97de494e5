"""SDPA that reads grouped KV heads in place on the CPU: the attention kernel `sdpa` resolves to.

transformers' `sdpa` repeats a grouped-query model's KV heads up to the query heads
(`repeat_kv`, a copy of keys and values in every layer, and a sum over the copies in backward)
whenever it is given a mask, because CUDA's masked SDPA kernels do not take grouped heads. The
CPU's do: torch's `scaled_dot_product_attention(..., enable_gqa=True)` reads the KV heads where
they are, with the same numbers. Padded forwards always carry a mask, so on the CPU every layer
of every log-prob, reference and update pass paid that copy (and on CPU decode steps).

`SDPA_GQA` is transformers' SDPA in every other case (CUDA and other accelerators, no mask, no
grouped heads, position bias, a paged cache), so it is the kernel `attn_implementation` resolves
to where it would resolve to `sdpa`; a model's config then reports `SDPA_GQA`.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

SDPA_GQA = "kuberl_sdpa_gqa"


def sdpa_gqa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature; (rows, tokens, heads, dim) out, as `sdpa` returns."""
    if not _reads_heads_in_place(module, query, attention_mask, kwargs):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs
        )
    # With a mask transformers' SDPA never sets `is_causal` (the mask carries causality).
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        enable_gqa=True,
    )
    return out.transpose(1, 2).contiguous(), None


def _reads_heads_in_place(
    module: torch.nn.Module,
    query: torch.Tensor,
    attention_mask: torch.Tensor | None,
    kwargs: dict[str, Any],
) -> bool:
    """Where transformers' SDPA would repeat the KV heads and the CPU kernel need not."""
    return (
        query.device.type == "cpu"
        and getattr(module, "num_key_value_groups", 1) > 1
        and attention_mask is not None
        and kwargs.get("position_bias") is None
        and kwargs.get("cache") is None
        and not kwargs.get("output_attentions", False)
    )


def register() -> str:
    """Make `SDPA_GQA` a name transformers accepts as `attn_implementation` (idempotent)."""
    AttentionInterface.register(SDPA_GQA, sdpa_gqa_attention)
    AttentionMaskInterface.register(SDPA_GQA, sdpa_mask)
    return SDPA_GQA
