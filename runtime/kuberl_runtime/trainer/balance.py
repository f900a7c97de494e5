"""`trainer.balance_batch`: reorder a step's rows so every rank gets a similar amount of work.

verl 0.9.1 semantics (`RayPPOTrainer._balance_batch`): each row's workload is estimated from its
token count s (prompt + response, from the attention mask) as 24576·s + s² (dense-transformer
FLOPs for a 4096-wide model, up to a constant); the rows are split into one equal-count group
per data-parallel rank with the Karmarkar–Karp largest-differencing method; inside a group rows
are sorted by workload and laid out small, …, large, …, small (light micro-batches at both ends).
Rank r then works on group r, mini-batch by mini-batch, exactly as verl's contiguous dispatch
would hand it out. Metrics use verl's keys (`global_seqlen/min`, …) and count tokens.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

Member = tuple[int, int]
"""(row index, value)."""


def row_workloads(attention_mask: torch.Tensor) -> list[int]:
    seqlens = attention_mask.view(attention_mask.shape[0], -1).sum(-1).long()
    return (24576 * seqlens + seqlens**2).tolist()


@dataclass
class _Subset:
    total: int = 0
    members: list[Member] = field(default_factory=list)

    def key(self) -> tuple[int, int, list[Member]]:
        return (self.total, len(self.members), self.members)


class _Partial:
    """k subsets of some of the rows, kept largest first."""

    def __init__(self, subsets: list[_Subset]) -> None:
        self.subsets = sorted(subsets, key=_Subset.key, reverse=True)

    @property
    def spread(self) -> int:
        return self.subsets[0].total - self.subsets[-1].total

    def __lt__(self, other: _Partial) -> bool:
        # heapq pops the smallest: make that the widest spread, then the heaviest largest subset.
        if self.spread != other.spread:
            return self.spread > other.spread
        return self.subsets[0].key() > other.subsets[0].key()

    def absorb(self, other: _Partial) -> None:
        """Pair this one's largest subset with the other's smallest, and so on down."""
        for mine, theirs in zip(self.subsets, reversed(other.subsets), strict=True):
            mine.members.extend(theirs.members)
            mine.total += theirs.total
        self.subsets = sorted(self.subsets, key=_Subset.key, reverse=True)


def karmarkar_karp(values: Sequence[int], k: int, equal_size: bool) -> list[list[int]]:
    """k groups of row indices with nearly equal sums of `values` (largest differencing)."""
    assert len(values) >= k, f"{len(values)} rows cannot fill {k} groups"
    ordered = sorted((value, index) for index, value in enumerate(values))
    heap: list[_Partial] = []
    if equal_size:
        assert len(values) % k == 0, f"{len(values)} rows do not split into {k} equal groups"
        for start in range(0, len(ordered), k):
            chunk = ordered[start : start + k]
            heapq.heappush(heap, _Partial([_Subset(v, [(i, v)]) for v, i in chunk]))
    else:
        for value, index in ordered:
            singles = [_Subset(value, [(index, value)])] + [_Subset() for _ in range(k - 1)]
            heapq.heappush(heap, _Partial(singles))
    while len(heap) > 1:
        first, second = heapq.heappop(heap), heapq.heappop(heap)
        first.absorb(second)
        heapq.heappush(heap, first)
    groups = [sorted(index for index, _ in subset.members) for subset in heap[0].subsets]
    assert all(groups), "a group came out empty"
    return groups


def balanced_groups(workloads: Sequence[int], num_ranks: int) -> list[list[int]]:
    """One group of rows per rank, each laid out light-heavy-light as verl orders it."""
    groups = karmarkar_karp(workloads, num_ranks, equal_size=True)
    laid_out = []
    for group in groups:
        by_load = sorted(group, key=lambda row: (workloads[row], row))
        laid_out.append(by_load[::2] + by_load[1::2][::-1])
    return laid_out


def balance_order(workloads: Sequence[int], positions: Sequence[Sequence[int]]) -> list[int]:
    """A permutation `order` (new row p = old row order[p]) that hands rank r its balanced group.

    `positions[r]` are the row positions rank r works on, in the order it takes them.
    """
    groups = balanced_groups(workloads, len(positions))
    order = [-1] * len(workloads)
    for rank_positions, group in zip(positions, groups, strict=True):
        assert len(rank_positions) == len(group), (len(rank_positions), len(group))
        for position, row in zip(rank_positions, group, strict=True):
            order[position] = row
    assert sorted(order) == list(range(len(workloads)))
    return order


def seqlen_balance_metrics(
    seqlens: Sequence[int],
    before: Sequence[Sequence[int]],
    after: Sequence[Sequence[int]],
    prefix: str = "global_seqlen",
) -> dict[str, float]:
    """Tokens per rank before and after balancing (verl's `log_seqlen_unbalance` keys)."""
    old = [sum(seqlens[row] for row in rows) for rows in before]
    new = [sum(seqlens[row] for row in rows) for rows in after]
    return {
        f"{prefix}/min": min(old),
        f"{prefix}/max": max(old),
        f"{prefix}/minmax_diff": max(old) - min(old),
        f"{prefix}/balanced_min": min(new),
        f"{prefix}/balanced_max": max(new),
        f"{prefix}/mean": sum(old) / len(old),
    }
