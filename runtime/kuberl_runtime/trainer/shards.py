"""Which rows of the step's batch each rank works on, and the reassembly of their outputs.

Every rank holds the whole batch; forward and update work is split so that each data-parallel
rank handles its share of every mini-batch (the ranks of a Ulysses SP group share their rows and
return the same values for them).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from kuberl_api.plan import RunPlan
from kuberl_runtime.distributed import RankInfo, all_gather_rows
from kuberl_runtime.trainer.batch import Batch, shard_rows

RankWork = Callable[[Batch], dict[str, torch.Tensor]]


class RowShards:
    def __init__(self, plan: RunPlan, ranks: RankInfo) -> None:
        self.plan = plan
        self.ranks = ranks

    def local_rows(self, num_rows: int, rank: int | None = None) -> list[int]:
        """`rank`'s (default: this rank's) share of every mini-batch of the step's rows: its
        data-parallel rank's (the ranks of a Ulysses SP group share their rows)."""
        plan = self.plan
        mini = min(plan.actor.ppo_mini_batch_size * plan.rollout.n, num_rows)
        rank = self.ranks.rank if rank is None else rank
        placement = plan.placement
        return shard_rows(num_rows, mini, rank // placement.sp_size, placement.dp_size)

    def on_shards(self, batch: Batch, fn: RankWork) -> dict[str, torch.Tensor]:
        """Run `fn` on this rank's rows and reassemble every output over the whole batch (the
        ranks of an SP group return the same rows with the same values)."""
        return self.gather_local(len(batch), fn(batch.select(self.local_rows(len(batch)))))

    def gather_local(
        self, num_rows: int, outputs: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Every rank's `outputs` for its `local_rows`, reassembled over all `num_rows` rows."""
        world = self.ranks.world_size
        order = [row for r in range(world) for row in self.local_rows(num_rows, r)]
        index = torch.tensor(order)
        result = {}
        for key, value in outputs.items():
            gathered = all_gather_rows(value)
            full = gathered.new_empty((num_rows, *gathered.shape[1:]))
            full[index] = gathered
            result[key] = full
        return result
