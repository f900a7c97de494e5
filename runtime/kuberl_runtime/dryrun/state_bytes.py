"""What one rank holds of a sharded model's parameters and of its optimizer's state."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from torch.distributed.tensor import DTensor


def local_bytes(model: nn.Module) -> int:
    """This rank's shards of `model`'s parameters."""
    return shard_bytes(model.parameters())


def optimizer_bytes(optimizer: torch.optim.Optimizer) -> int:
    """This rank's shards of the optimizer's tensor state (AdamW's moments; not the scalar
    `step` counters): what `fsdp_config.optimizer_offload` parks on the host."""
    values = (v for state in optimizer.state.values() for v in state.values())
    return shard_bytes(v for v in values if isinstance(v, torch.Tensor) and v.dim() > 0)


def shard_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """What this rank holds of `tensors` (a DTensor's local shard)."""
    shards = (t.to_local() if isinstance(t, DTensor) else t for t in tensors)
    return sum(t.numel() * t.element_size() for t in shards)
