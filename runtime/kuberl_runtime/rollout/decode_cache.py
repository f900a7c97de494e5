"""The HF rollout's KV cache: buffers allocated once per `generate`, read without copying heads.

transformers' `DynamicCache` concatenates every layer's keys and values with the new token at
each decode step (a copy of the whole cache per token), and its SDPA path on the CPU repeats the
grouped KV heads to the query heads before every call whenever a padding mask is present (another
copy of the whole cache per layer and token). Here each layer writes into a buffer sized for the
prompt plus the longest response and hands attention a view of the filled part, and on the CPU a
one-token decode step calls SDPA with `enable_gqa` (torch reads the KV heads in place; the same
numbers as the repeated heads). Rows leave the cache (`keep_rows`) when they finish and rows are
copied in (`keep_rows` with repeated indices) when several samples share one prompt's prefill.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import AttentionInterface, Cache, DynamicCache
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

DECODE_SDPA = "kuberl_decode_sdpa"  # SDPA everywhere; grouped heads in place for CPU decode


class PreallocatedLayer(DynamicLayer):
    """`DynamicLayer` semantics over (rows, heads, capacity, dim) buffers: no per-token concat."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.length = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        rows, _, _, _ = key_states.shape
        self._keys = key_states.new_empty(
            (rows, key_states.shape[1], self.capacity, key_states.shape[3])
        )
        self._values = value_states.new_empty(
            (rows, value_states.shape[1], self.capacity, value_states.shape[3])
        )
        self.length = 0
        self._expose()
        self.is_initialized = True

    def _expose(self) -> None:
        self.keys = self._keys[:, :, : self.length]
        self.values = self._values[:, :, : self.length]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self.capacity:
            raise ValueError(
                f"KV cache capacity {self.capacity} tokens exceeded ({end}): size it for the "
                "prompt columns plus response_length"
            )
        self._keys[:, :, self.length : end].copy_(key_states)
        self._values[:, :, self.length : end].copy_(value_states)
        self.length = end
        self._expose()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def get_max_length(self) -> int:
        return self.capacity

    def reset(self) -> None:
        self.length = 0
        super().reset()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep rows `indices` (in that order; a repeated index copies its row)."""
        if not self.is_initialized:
            return
        for name in ("_keys", "_values"):
            old = getattr(self, name)
            new = old.new_empty((len(indices), *old.shape[1:]))
            new[:, :, : self.length] = old[indices, :, : self.length]
            setattr(self, name, new)
        self._expose()

    def batch_repeat_interleave(self, repeats: int) -> None:
        rows = self._keys.shape[0] if self.is_initialized else 0
        self.batch_select_indices(torch.arange(rows, device=self.device).repeat_interleave(repeats))


def decode_cache(config: Any, capacity: int) -> Cache:
    """Preallocated layers for a decoder with full attention in every layer; otherwise (sliding
    windows, linear attention) transformers' own `DynamicCache` for that config."""
    text = config.get_text_config(decoder=True)
    layer_types = getattr(text, "layer_types", None) or []
    sliding = getattr(text, "use_sliding_window", False) and getattr(text, "sliding_window", None)
    layers = getattr(text, "num_hidden_layers", None)
    if sliding or any(t != "full_attention" for t in layer_types) or not layers:
        return DynamicCache(config=config)
    return Cache(layers=[PreallocatedLayer(capacity) for _ in range(layers)])


def keep_rows(cache: Cache, indices: torch.Tensor) -> None:
    """Rows `indices` of every layer, in that order (transformers' layers and ours alike)."""
    for layer in cache.layers:
        layer.batch_select_indices(indices)


def decode_sdpa(
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
    """transformers' SDPA, except a masked one-token step on the CPU with grouped KV heads:
    there SDPA reads the KV heads in place (`enable_gqa`) instead of a repeated copy."""
    groups = getattr(module, "num_key_value_groups", 1)
    one_token = query.shape[2] == 1 and kwargs.get("position_bias") is None
    if query.device.type != "cpu" or groups == 1 or not one_token or attention_mask is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs
        )
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


@contextmanager
def decode_attention(model: torch.nn.Module) -> Iterator[bool]:
    """While generating, a decoder on SDPA runs `decode_sdpa` (yields whether it does)."""
    AttentionInterface.register(DECODE_SDPA, decode_sdpa)
    AttentionMaskInterface.register(DECODE_SDPA, sdpa_mask)
    text = model.config.get_text_config(decoder=True)
    before = text._attn_implementation
    swap = before == "sdpa"
    if swap:
        text._attn_implementation = DECODE_SDPA
    try:
        yield swap
    finally:
        if swap:
            text._attn_implementation = before
