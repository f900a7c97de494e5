"""Shared helpers for the algorithms tests: an allocation tracker for the chunked vocab math."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

# TorchDispatchMode is the one hook that also sees the ops autograd runs in backward.
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


class AllocationTracker(TorchDispatchMode):
    """Records (op, numel) of every op output that got fresh storage (views and aliases do not)."""

    def __init__(self) -> None:
        super().__init__()
        self.allocations: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        seen = {
            t.untyped_storage().data_ptr()
            for t in tree_leaves((args, kwargs))
            if isinstance(t, torch.Tensor)
        }
        out = func(*args, **kwargs)
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and tensor.untyped_storage().data_ptr() not in seen:
                self.allocations.append((str(func), tensor.numel()))
        return out

    def larger_than(self, numel: int) -> list[tuple[str, int]]:
        return [entry for entry in self.allocations if entry[1] > numel]


@pytest.fixture
def allocation_tracker() -> Callable[[], AllocationTracker]:
    return AllocationTracker
