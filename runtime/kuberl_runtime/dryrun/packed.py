"""What the packed (`use_remove_padding`) path needs to run on fake tensors.

Two things in that path depend on values, which fake tensors do not have:

- Packing selects the valid tokens with boolean masks (`input_ids[attention_mask]`), whose
  result size is the number of true entries. The dry run's rows are full length (its worst
  case), so every mask is all true: `FullMasks` answers those selections with every position
  (a shape; fake tensors carry no values either way). One mask is not all true under Ulysses
  SP: which response predictors fall in this rank's slice; the dry run knows that count from
  its layout and passes it as `FullMasks(counts={shape: true entries})`.
- On a GPU the runtime runs `flash_attention_2` (flash-attn is in the CUDA image): transformers
  finds the packed sequences from the restarting position ids and calls the varlen kernel,
  which attends within each sequence only. Here the kernel is torch's own flash varlen op
  (`aten._flash_attention_forward` with `cu_seqlens`, `engine.varlen.flash_varlen`, which the
  runtime itself runs on CUDA when flash-attn is absent), registered with transformers as
  `FLASH_VARLEN`; its fake kernel gives flash's memory and `FlopCounterMode` counts it per
  sequence. The boundaries are those of the dry run's full-length rows (`sequences_of`).

`sdpa` instead builds transformers' block-diagonal mask over the whole packed row, a dense
T × T attention: the dry run can run that too, to show what varlen saves.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

from kuberl_runtime.engine.varlen import flash_varlen

FLASH_VARLEN = "kuberl_dryrun_varlen"  # no "flash" in it: transformers would look for flash-attn
_SEQUENCE_LENGTH: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "kuberl_dryrun_sequence_length", default=None
)
_aten = torch.ops.aten


@contextlib.contextmanager
def sequences_of(length: int) -> Iterator[None]:
    """Every sequence the attention sees is `length` tokens (the dry run's full-length rows)."""
    token = _SEQUENCE_LENGTH.set(length)
    try:
        yield
    finally:
        _SEQUENCE_LENGTH.reset(token)


def flash_varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature ((B, H, T, D) in, (B, T, H, D) out) over flash varlen."""
    batch, _, length, _ = query.shape
    total = batch * length
    sequence = _SEQUENCE_LENGTH.get() or length
    # Whole sequences, then (Ulysses SP pads the packed row to a multiple of sp) the padding.
    bounds = list(range(0, total + 1, sequence)) + ([total] if total % sequence else [])
    cu_seqlens = torch.tensor(bounds, dtype=torch.int32, device=query.device)
    out = flash_varlen(query, key, value, cu_seqlens, sequence, dropout=dropout, scaling=scaling)
    return out, None


AttentionInterface.register(FLASH_VARLEN, flash_varlen_attention)
AttentionMaskInterface.register(FLASH_VARLEN, flash_attention_mask)


class FullMasks(TorchDispatchMode):
    """Boolean selections answered as if every mask were all true (the dry run's full rows).

    `x[mask]` becomes `x[i0, i1, ...]` with one index per masked dimension and one entry per
    masked element; `nonzero(mask)` returns every position. Only shapes matter: fake tensors
    have no values. `counts`: masks of these shapes select that many entries instead.
    """

    def __init__(self, counts: dict[tuple[int, ...], int] | None = None) -> None:
        super().__init__()
        self.counts = dict(counts or {})

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is _aten.index.Tensor and any(_is_mask(i) for i in args[1]):
            indices: list[torch.Tensor | None] = []
            for index in args[1]:
                if _is_mask(index):
                    selected = self.counts.get(tuple(index.shape), index.numel())
                    every = torch.zeros(selected, dtype=torch.long, device=index.device)
                    indices.extend([every] * index.dim())
                else:
                    indices.append(index)
            return func(args[0], indices)
        if func is _aten.nonzero.default:
            (mask,) = args
            return torch.zeros(mask.numel(), mask.dim(), dtype=torch.long, device=mask.device)
        return func(*args, **kwargs)


def _is_mask(index: Any) -> bool:
    return isinstance(index, torch.Tensor) and index.dtype in (torch.bool, torch.uint8)
