"""The actor's weights as the rollout engine receives them: one gathered tensor at a time.

The FSDP2 state dict holds this rank's shards (DTensors, nothing gathered); each entry is
gathered (`full_tensor`) only when the rollout asks for the next one, and the stream keeps no
reference to what it yielded. The engine side merges LoRA one module at a time and casts a
bucket at a time (rollout/vllm_weights.py), so a sync never holds the whole model: what verl's
`rollout.layered_summon` buys (a layer-by-layer gather instead of the whole model's) is how
this sync always runs, and the key has no effect (api/kuberl_api/keys/rollout.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn
from torch.distributed.tensor import DTensor


def gathered_weights(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """`model`'s state dict entries, each gathered whole when the consumer takes it."""
    for name, tensor in model.state_dict().items():
        yield name, tensor.full_tensor() if isinstance(tensor, DTensor) else tensor
