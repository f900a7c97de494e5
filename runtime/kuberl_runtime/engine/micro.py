"""Micro-batches: forward-only passes over a rank's rows (results back in row order), and the
global-batch counts an update aggregates every micro-batch's loss with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from kuberl_runtime.algorithms import GlobalBatch
from kuberl_runtime.engine.packing import fixed_micro_batches, token_budget_micro_batches
from kuberl_runtime.trainer.batch import Batch


@dataclass(frozen=True)
class MicroBatching:
    """`*_micro_batch_size_per_gpu`, or a token budget when `use_dynamic_bsz`.

    `sp_size`: the Ulysses degree; a micro-batch's tokens are spread over its SP group, so the
    budget per micro-batch is `max_token_len · sp_size` (verl's `prepare_micro_batches`)."""

    micro_batch_size: int | None = None
    use_dynamic_bsz: bool = False
    max_token_len: int = 16384
    sp_size: int = 1

    def split(self, batch: Batch) -> list[list[int]]:
        if self.use_dynamic_bsz:
            budget = self.max_token_len * self.sp_size
            return token_budget_micro_batches(batch["attention_mask"], budget)
        return fixed_micro_batches(len(batch), self.micro_batch_size or len(batch))


def forward_in_micro_batches(
    batch: Batch,
    batching: MicroBatching,
    run: Callable[[Batch], dict[str, torch.Tensor]],
) -> dict[str, torch.Tensor]:
    """Apply `run` to each micro-batch (no grad) and reassemble each output in row order."""
    groups = batching.split(batch)
    outputs: dict[str, list[torch.Tensor]] = {}
    with torch.no_grad():
        for rows in groups:
            whole = rows == list(range(len(batch)))  # one micro-batch: no copy of the rows
            for key, value in run(batch if whole else batch.select(rows)).items():
                outputs.setdefault(key, []).append(value.cpu())
    order = torch.tensor([row for rows in groups for row in rows])
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order))
    return {key: torch.cat(parts)[inverse] for key, parts in outputs.items()}


def global_batch_of(
    mini: Batch, *, dp_size: int, global_batch_size: int, device: torch.device, sp_size: int = 1
) -> GlobalBatch:
    """verl 0.9.1's engine counts for one mini-batch: its valid response tokens summed over the
    data-parallel ranks (one all-reduce; every rank calls it for every mini-batch), its rows on
    all ranks (`ppo_mini_batch_size · rollout.n`) and `dp_size`. The all-reduce runs over the
    world, where each SP group's `sp_size` ranks hold the same rows: it counts them once."""
    tokens = mini["response_mask"].sum().to(device=device, dtype=torch.float64)
    if dp_size * sp_size > 1:
        dist.all_reduce(tokens)
        tokens /= sp_size
    return GlobalBatch(
        dp_size=dp_size, batch_num_tokens=float(tokens), global_batch_size=global_batch_size
    )
