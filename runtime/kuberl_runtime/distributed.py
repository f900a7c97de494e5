"""Process-group setup and the few collectives the trainer needs (SPMD, every rank runs the loop).

Ranks find each other through the usual env vars (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT), which the launcher sets; nothing here knows how ranks were started.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from kuberl_runtime.device import Device


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def rank_info_from_env() -> RankInfo:
    return RankInfo(
        rank=int(os.environ.get("RANK", "0")),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
    )


_collective_device = torch.device("cpu")


def init_distributed(device: Device, timeout_s: int = 600) -> RankInfo:
    """Join (or create, for a single process) the default process group."""
    global _collective_device
    info = rank_info_from_env()
    _collective_device = device.torch_device(info.local_rank)
    if not dist.is_initialized():
        timeout = datetime.timedelta(seconds=timeout_s)
        # Still published for libraries that read them (vLLM's external launcher).
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        if info.world_size == 1:
            # One rank needs no rendezvous: an in-memory store, no port bound (a MASTER_PORT
            # inherited from a parent process may well be taken).
            store = dist.HashStore()
            dist.init_process_group(
                backend=device.backend, store=store, rank=0, world_size=1, timeout=timeout
            )
            return info
        dist.init_process_group(
            backend=device.backend, rank=info.rank, world_size=info.world_size, timeout=timeout
        )
    return info


def shutdown_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def barrier() -> None:
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def all_gather_rows(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate every rank's rows in rank order; all ranks must pass the same shape."""
    if world_size() == 1:
        return tensor
    # nccl/hccl gather accelerator tensors; the trainer keeps batches in host memory.
    local = tensor.to(_collective_device).contiguous()
    parts = [torch.empty_like(local) for _ in range(world_size())]
    dist.all_gather(parts, local)
    return torch.cat(parts, dim=0).to(tensor.device)


def all_gather_objects(obj: Any) -> list[Any]:
    if world_size() == 1:
        return [obj]
    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, src: int = 0) -> Any:
    if world_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def all_reduce_max(value: int) -> int:
    if world_size() == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.long, device=_collective_device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return int(tensor.item())


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
