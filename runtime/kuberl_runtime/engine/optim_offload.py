"""`fsdp_config.optimizer_offload`: the optimizer's state lives in host memory between steps.

As verl's FSDP workers do (`offload_fsdp_optimizer` / `load_fsdp_optimizer`), the AdamW moments
(``exp_avg``, ``exp_avg_sq``: twice the trainable parameters' bytes, sharded like them) are moved
to the host after each optimizer step and back to the parameters' device right before the next
one, so rollout, log-prob and the update's forward/backward passes run without them on the
accelerator. verl brings them back once per update; kuberl brings them back per optimizer step,
which keeps them off the device during the update's forward/backward passes too. The values are
moved, never changed, so training is bitwise the same as without offload. Scalar state (AdamW's
``step`` counters, which torch keeps on the host unless ``capturable``) stays where torch put it.

On a CPU run the host is the parameters' device: every move is a no-op in effect, but the same
path runs (tests/runtime/engine/test_optimizer_offload.py watches it with a stand-in host).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

import torch

logger = logging.getLogger(__name__)

HOST = torch.device("cpu")


class OptimizerOffload:
    """Moves `optimizer`'s state to `host` between steps (`enabled`), or leaves it in place."""

    def __init__(
        self, optimizer: torch.optim.Optimizer, *, enabled: bool, host: torch.device = HOST
    ) -> None:
        self.optimizer = optimizer
        self.enabled = enabled
        self.host = host

    @contextlib.contextmanager
    def for_step(self) -> Iterator[None]:
        """The state on the parameters' device inside, on the host after (when enabled)."""
        self.fetch()
        try:
            yield
        finally:
            self.park()

    def park(self) -> None:
        """Every non-scalar state tensor to the host."""
        if self.enabled:
            self._move_state(lambda _param: self.host)

    def fetch(self) -> None:
        """Every non-scalar state tensor to its parameter's device."""
        if self.enabled:
            self._move_state(lambda param: param.device)

    def state_devices(self) -> set[torch.device]:
        """Where the non-scalar state tensors are now (empty before the first step)."""
        return {t.device for t in self._state_tensors()}

    def move(self, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        """One state tensor to `device` (a DTensor keeps its placement, its shard moves)."""
        return tensor.to(device)

    def _move_state(self, target: Callable[[torch.Tensor], torch.device]) -> None:
        for group in self.optimizer.param_groups:
            for param in group["params"]:
                state = self.optimizer.state.get(param)
                if not state:
                    continue
                device = target(param)
                for key, value in state.items():
                    if _movable(value):
                        state[key] = self.move(value, device)

    def _state_tensors(self) -> Iterator[torch.Tensor]:
        for state in self.optimizer.state.values():
            yield from (value for value in state.values() if _movable(value))


def _movable(value: object) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() > 0
