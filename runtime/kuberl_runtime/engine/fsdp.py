"""`apply_fsdp`: shard a model with FSDP2 (`fully_shard`) per decoder layer, then the root.

Mixed precision (param dtype from `fsdp_config.dtype`, fp32 reduce) applies where the device
supports it; on CPU everything stays fp32. `offload_policy` (or `param_offload`) uses FSDP2's
CPUOffloadPolicy; on CPU it is a no-op since parameters already live in host memory.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

from kuberl_api.plan.sections import FSDPPlan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.model_builder import decoder_layers

_DTYPES = {
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
    "fp32": torch.float32,
    "float32": torch.float32,
}


def torch_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]


def offloads(fsdp_config: FSDPPlan, device: Device) -> bool:
    """Parameters live in host memory between uses (`param_offload` / `offload_policy`)."""
    return device.type != "cpu" and (fsdp_config.offload_policy or fsdp_config.param_offload)


def apply_fsdp(
    model: nn.Module, fsdp_config: FSDPPlan, device: Device, mesh: DeviceMesh | None = None
) -> nn.Module:
    """`mesh`: FSDP2's default (all ranks, the current device type) when None."""
    kwargs: dict = {"reshard_after_forward": fsdp_config.reshard_after_forward, "mesh": mesh}
    if device.supports_mixed_precision:
        kwargs["mp_policy"] = MixedPrecisionPolicy(
            param_dtype=torch_dtype(fsdp_config.dtype), reduce_dtype=torch.float32
        )
    if offloads(fsdp_config, device):
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=True)
    for layer in decoder_layers(model):
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model
