"""`apply_fsdp`: shard a model with FSDP2 (`fully_shard`) per decoder layer, then the root.

Mixed precision (param dtype from `fsdp_config.dtype`, fp32 reduce) applies where the device
supports it; on CPU everything stays fp32. `offload_policy` (or `param_offload`) uses FSDP2's
CPUOffloadPolicy; on CPU it is a no-op since parameters already live in host memory.
`fsdp_size` between 1 and the world size (exclusive) shards within groups of that many
consecutive ranks and replicates across the groups (HSDP: FSDP2 on a 2-D (replicate, shard)
mesh, verl's `(world / fsdp_size, fsdp_size)`); -1 or the world shards over all ranks.
"""

from __future__ import annotations

import functools
import logging

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

from kuberl_api.plan.sections import FSDPPlan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.model_builder import decoder_layers

logger = logging.getLogger(__name__)

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


def hybrid_mesh(fsdp_size: int, device_type: str) -> DeviceMesh | None:
    """The (replicate, shard) mesh for `fsdp_size`, or None to shard over all ranks."""
    world = dist.get_world_size()
    if fsdp_size < 1 or fsdp_size >= world:
        return None
    return _hybrid_mesh(world // fsdp_size, fsdp_size, device_type)


@functools.cache
def _hybrid_mesh(replicas: int, fsdp_size: int, device_type: str) -> DeviceMesh:
    """One mesh per layout and process (every model of the run shares its process groups)."""
    if dist.get_rank() == 0:
        logger.info(
            "hybrid sharding (fsdp_size %d): %d replica group(s) x %d shard(s)",
            fsdp_size,
            replicas,
            fsdp_size,
        )
    return init_device_mesh(
        device_type, (replicas, fsdp_size), mesh_dim_names=("replicate", "shard")
    )


def mixed_precision_policy(fsdp_config: FSDPPlan, device: Device) -> MixedPrecisionPolicy | None:
    """Parameters cast to `dtype` for compute, gradients reduced in `reduce_dtype`; None where the
    device keeps everything in fp32 (CPU)."""
    if not device.supports_mixed_precision:
        return None
    return MixedPrecisionPolicy(
        param_dtype=torch_dtype(fsdp_config.dtype),
        reduce_dtype=torch_dtype(fsdp_config.reduce_dtype),
    )


def apply_fsdp(
    model: nn.Module, fsdp_config: FSDPPlan, device: Device, mesh: DeviceMesh | None = None
) -> nn.Module:
    """`mesh`: the plan's hybrid mesh (`fsdp_size`) or FSDP2's default (all ranks) when None."""
    if mesh is None:
        mesh = hybrid_mesh(fsdp_config.fsdp_size, device.type)
    kwargs: dict = {"reshard_after_forward": fsdp_config.reshard_after_forward, "mesh": mesh}
    policy = mixed_precision_policy(fsdp_config, device)
    if policy is not None:
        kwargs["mp_policy"] = policy
    if offloads(fsdp_config, device):
        kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=True)
    for layer in decoder_layers(model):
        fully_shard(layer, **kwargs)
    fully_shard(model, **kwargs)
    return model
