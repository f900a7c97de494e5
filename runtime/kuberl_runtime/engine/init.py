"""Sharded initialisation: build on the meta device, shard, then receive the weights from rank 0.

Only rank 0 reads the checkpoint (into host memory); every rank allocates just its own shards on
its device, and the full tensors stream from rank 0 one at a time (a broadcast into a device
buffer, then each rank keeps its slice, as `set_model_state_dict(broadcast_from_rank0=True)` does;
done here with `distribute_tensor(src_data_rank=None)`, which slices by shape alone and so also
runs on the dry run's fake tensors). Per-rank device peak during init is one shard
of the model plus one full tensor, instead of the whole model in fp32 on every device.
Non-persistent buffers (rotary frequencies) are not in any state dict: they are recomputed from
the config on every rank.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, distribute_tensor

from kuberl_api.plan.sections import FSDPPlan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.fsdp import apply_fsdp, offloads


def build_sharded(
    build_empty: Callable[[], nn.Module],
    build_full: Callable[[], nn.Module],
    fsdp_config: FSDPPlan,
    device: Device,
    target: torch.device,
    *,
    is_main: bool,
    mesh: DeviceMesh | None = None,
) -> nn.Module:
    """`build_empty()` (meta) sharded onto `target`, weights from rank 0's `build_full()` (host).

    CPU-offloaded modules (`param_offload`) still load everywhere and shard afterwards: their
    shards live in host memory, which this streaming does not place yet.
    """
    if offloads(fsdp_config, device):
        return apply_fsdp(build_full().to(target), fsdp_config, device, mesh)
    model = apply_fsdp(build_empty(), fsdp_config, device, mesh)
    full = build_full().state_dict() if is_main else {}
    load_from_rank0(model, full, target)
    return model


def load_from_rank0(model: nn.Module, full: dict[str, torch.Tensor], target: torch.device) -> None:
    """Allocate `model`'s shards on `target` and fill them from rank 0's full state dict."""
    model.to_empty(device=target)
    is_main = dist.get_rank() == 0
    with torch.no_grad():
        for name, param in model.state_dict().items():
            if is_main:
                # always a fresh device buffer (freed below), even where host and target agree
                source = full[name].to(device=target, dtype=param.dtype, copy=True)
            else:
                source = torch.empty(param.shape, dtype=param.dtype, device=target)
            dist.broadcast(source, src=0)
            if isinstance(param, DTensor):
                mine = distribute_tensor(
                    source, param.device_mesh, param.placements, src_data_rank=None
                )
                param.to_local().copy_(mine.to_local())
            else:
                param.copy_(source)
            del source
    restore_computed_buffers(model, target)


def restore_computed_buffers(model: nn.Module, target: torch.device) -> None:
    """Recompute the rotary-embedding buffers `to_empty` left uninitialised.

    transformers' rotary modules (matched by class name, as transformers' own initialiser does)
    are built from the model config alone; a fresh one on the host has the right values.
    """
    for module in model.modules():
        if type(module).__name__.endswith("RotaryEmbedding"):
            fresh = type(module)(config=module.config)
            for name, buffer in fresh.named_buffers(recurse=False):
                module.get_buffer(name).copy_(buffer.to(target))
