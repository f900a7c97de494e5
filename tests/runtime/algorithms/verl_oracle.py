"""verl 0.9.1's own functions as the oracle, and random inputs shaped like a real batch.

verl is installed --no-deps in the test environment (hack/requirements-nodeps.txt); its import-time
needs are in the dev extra. Inputs are float64 so that a 1e-6 tolerance measures semantics, not
rounding. Masks have gaps in the middle (observation spans), rows without any valid token, and
right padding, as multi-turn batches do.
"""

from __future__ import annotations

import numpy as np
import torch
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo import core_algos
from verl.workers.config import FSDPActorConfig, PolicyLossConfig

TOL = 1e-6

__all__ = [
    "TOL",
    "AlgoConfig",
    "PolicyLossConfig",
    "RandomBatch",
    "actor_config",
    "core_algos",
    "random_batch",
]


class RandomBatch:
    """Token tensors (rows, L) plus per-row prompt uids, from one integer seed."""

    def __init__(self, seed: int, rows: int, length: int, group_size_max: int = 4) -> None:
        g = torch.Generator().manual_seed(seed)
        rng = np.random.default_rng(seed)
        self.rows, self.length = rows, length
        self.mask = self._mask(g, rows, length)
        self.rewards_everywhere = torch.randn(rows, length, generator=g, dtype=torch.float64)
        # The trainer's token_level_rewards are zero outside the response mask (scores placed at
        # the last valid token, in-reward KL masked); group estimators are compared on that.
        self.rewards = self.rewards_everywhere * self.mask
        outcome = torch.randint(0, 3, (rows,), generator=g).to(torch.float64)
        last = torch.where(self.mask.any(-1), _last_valid(self.mask), 0)
        self.outcome_rewards = torch.zeros(rows, length, dtype=torch.float64)
        self.outcome_rewards[torch.arange(rows), last] = outcome * self.mask.any(-1)
        self.values = torch.randn(rows, length, generator=g, dtype=torch.float64)
        self.old_log_prob = -torch.rand(rows, length, generator=g, dtype=torch.float64) * 3
        self.log_prob = self.old_log_prob + torch.randn(rows, length, generator=g) * 0.3
        self.ref_log_prob = self.old_log_prob + torch.randn(rows, length, generator=g) * 0.5
        self.advantages = torch.randn(rows, length, generator=g, dtype=torch.float64)
        self.baselines = torch.randn(rows, generator=g, dtype=torch.float64)
        self.index = _uids(rng, rows, group_size_max)

    @staticmethod
    def _mask(g: torch.Generator, rows: int, length: int) -> torch.Tensor:
        lengths = torch.randint(0, length + 1, (rows,), generator=g)
        lengths[0] = length  # at least one full row: the batch always has tokens to whiten
        mask = (torch.arange(length) < lengths.unsqueeze(-1)).to(torch.float64)
        gaps = torch.rand(rows, length, generator=g) < 0.25  # observation tokens inside a response
        mask = mask * (~gaps)
        mask[0, :2] = 1.0
        if rows > 2:
            mask[-1] = 0.0  # a row with no valid token
        return mask


def _last_valid(mask: torch.Tensor) -> torch.Tensor:
    positions = torch.arange(mask.shape[1]).expand_as(mask)
    return torch.where(mask.bool(), positions, -1).amax(-1)


def _uids(rng: np.random.Generator, rows: int, group_size_max: int) -> np.ndarray:
    uids: list[str] = []
    while len(uids) < rows:
        uid = f"prompt-{len(uids)}"
        uids.extend([uid] * int(rng.integers(1, group_size_max + 1)))
    return np.array(uids[:rows], dtype=object)


def random_batch(seed: int, rows: int = 9, length: int = 11) -> RandomBatch:
    return RandomBatch(seed, rows, length)


def actor_config(**overrides: object) -> FSDPActorConfig:
    """verl's own actor config for its loss functions (they read clip ranges from it)."""
    settings: dict[str, object] = {
        "strategy": "fsdp",
        "ppo_mini_batch_size": 4,
        "ppo_micro_batch_size_per_gpu": 1,
        "rollout_n": 1,
    }
    settings.update(overrides)
    return FSDPActorConfig(**settings)
