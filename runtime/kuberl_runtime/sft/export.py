"""The whole model's weights gathered from the FSDP2 shards (every rank calls; rank 0 keeps)."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """Unsharded host copies on rank 0 (empty elsewhere); a collective: every rank must call."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options)
