"""What the dry run counts: collective bytes per rank, and attention FLOPs on CPU kernels.

`FlopCounterMode` has formulas for the CUDA attention kernels but counts 0 for the CPU flash
kernel the fake tensors dispatch to; `FLOP_FORMULAS` registers torch's own SDPA formulas for it.
It also counts the flash varlen kernel with grouped-query attention (fewer key/value heads) as
torch 2.13 does — every query head — which torch 2.11's formula refuses (the GPU machine's torch).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed._tools.fake_collectives import collective_ops
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed.tensor import DTensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import (
    _unpack_flash_attention_nested_shapes,
    sdpa_backward_flop_count,
    sdpa_flop_count,
)


def _cpu_sdpa(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_sdpa_backward(grad_shape, query_shape, key_shape, value_shape, *args, **kwargs) -> int:
    kwargs.pop("out_shape", None)
    return sdpa_backward_flop_count(grad_shape, query_shape, key_shape, value_shape)


def _as_query_heads(query_shape: tuple[int, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    """A key/value shape broadcast to the query's heads, as the kernel computes it."""
    return (shape[0], query_shape[1], *shape[2:])


def _flash_varlen(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, *args, **kwargs) -> int:
    shapes = _unpack_flash_attention_nested_shapes(
        query=query,
        key=key,
        value=value,
        cum_seq_q=cum_seq_q,
        cum_seq_k=cum_seq_k,
        max_q=max_q,
        max_k=max_k,
    )
    return sum(
        sdpa_flop_count(q, _as_query_heads(q, k), _as_query_heads(q, v)) for q, k, v, _ in shapes
    )


def _flash_varlen_backward(
    grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, *a, **kw
) -> int:
    shapes = _unpack_flash_attention_nested_shapes(
        query=query,
        key=key,
        value=value,
        grad_out=grad_out,
        cum_seq_q=cum_seq_q,
        cum_seq_k=cum_seq_k,
        max_q=max_q,
        max_k=max_k,
    )
    return sum(
        sdpa_backward_flop_count(g, q, _as_query_heads(q, k), _as_query_heads(q, v))
        for q, k, v, g in shapes
    )


_flash_varlen._get_raw = True  # type: ignore[attr-defined]  # FlopCounterMode: raw arguments
_flash_varlen_backward._get_raw = True  # type: ignore[attr-defined]

_aten = torch.ops.aten
FLOP_FORMULAS = {
    _aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward,
    _aten._flash_attention_forward: _flash_varlen,
    _aten._flash_attention_backward: _flash_varlen_backward,
}


class CollectiveBytes(TorchDispatchMode):
    """Bytes through this rank's collectives: the full (unsharded) side of each one.

    All-gather: what arrives; reduce-scatter: what is reduced; all-reduce/broadcast: the tensor.
    """

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.calls = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in collective_ops and "wait_tensor" not in str(func):
            self.calls += 1
            tensors = [
                t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)
            ]
            self.bytes += max((t.numel() * t.element_size() for t in tensors), default=0)
        return out


class LargestAllocation(TorchDispatchMode):
    """The largest tensor any op returns, overall and in fp32 (bytes), as this rank holds it.

    Ops on DTensors are let through (`NotImplemented`) so that DTensor runs them on its local
    shards first and this mode sees those, not the global shapes (as FSDP2's memory tracker does).
    """

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0
        self.largest_fp32 = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if any(t is DTensor for t in types):
            return NotImplemented
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                size = t.numel() * t.element_size()
                self.largest = max(self.largest, size)
                if t.dtype == torch.float32:
                    self.largest_fp32 = max(self.largest_fp32, size)
        return out


class MemTracker(FSDPMemTracker):
    """FSDP2's memory tracker, tolerating FSDP units that never run forward.

    The tracker assumes every unit ran forward before its post-backward; a vision-language
    model's vision blocks do not on the dry run's text-only rows (their state is counted, as
    sharded parameters and optimizer state; their activations are not). Those units' post-backward
    runs untracked: nothing was unsharded and they have no gradients.
    """

    def _fsdp_param_group_post_backward(self, fsdp_mod, orig_fsdp_param_group_post_backward):  # type: ignore[override]
        tracked = super()._fsdp_param_group_post_backward(
            fsdp_mod, orig_fsdp_param_group_post_backward
        )

        def inner(*args: Any, **kwargs: Any) -> None:
            if fsdp_mod not in self.memory_tracking:
                return orig_fsdp_param_group_post_backward(*args, **kwargs)
            return tracked(*args, **kwargs)

        return inner
