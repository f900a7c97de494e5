"""Helpers of the Ulysses SP equality tests: ranks compare what they compute with a one-rank
oracle that rank 0 runs without collectives (tests/runtime/engine/test_ulysses.py,
tests/runtime/vl/test_vl_sequence_parallel.py)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

TOLERANCE = {"atol": 2e-5, "rtol": 1e-4}


def capture_grads(module: ModuleType) -> list[dict[str, torch.Tensor]]:
    """`module`'s optimizer steps (its `clip_and_step`) record the full gradients and drop them
    instead of stepping."""
    steps: list[dict[str, torch.Tensor]] = []

    def capture(model, optimizer, max_norm):
        steps.append(
            {
                name: p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad.clone()
                for name, p in model.named_parameters()
                if p.grad is not None
            }
        )
        optimizer.zero_grad(set_to_none=True)
        return 0.0, True

    module.clip_and_step = capture
    return steps


def assert_close(ours: Any, theirs: Any, what: str) -> None:
    torch.testing.assert_close(ours, theirs, **TOLERANCE, msg=lambda m: f"{what}: {m}")


def mean_over_ranks(value: float) -> float:
    box = [None] * dist.get_world_size()
    dist.all_gather_object(box, value)
    return sum(box) / len(box)


def on_rank0(compute: Callable[[], Any]) -> Any:
    """`compute()` on rank 0 only (the oracle runs no collectives), its result on every rank."""
    box = [compute() if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]
