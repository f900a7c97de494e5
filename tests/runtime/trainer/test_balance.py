"""`trainer.balance_batch`: the same groups, order and metrics as verl 0.9.1's `_balance_batch`."""

from __future__ import annotations

import random

import pytest
import torch
from verl.utils import seqlen_balancing as verl_balancing

from kuberl_runtime.trainer.balance import (
    balance_order,
    balanced_groups,
    karmarkar_karp,
    row_workloads,
    seqlen_balance_metrics,
)
from kuberl_runtime.trainer.batch import shard_rows


def _mask(seqlens: list[int], width: int) -> torch.Tensor:
    mask = torch.zeros(len(seqlens), width, dtype=torch.long)
    for row, length in enumerate(seqlens):
        mask[row, width - length :] = 1
    return mask


def _verl_layout(workloads: list[int], k: int) -> list[list[int]]:
    groups = verl_balancing.get_seqlen_balanced_partitions(workloads, k, equal_size=True)
    out = []
    for group in groups:
        group = sorted(group, key=lambda x: (workloads[x], x))
        out.append(group[::2] + group[1::2][::-1])
    return out


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("k", [1, 2, 3, 4, 8])
def test_groups_and_layout_equal_verls(seed: int, k: int) -> None:
    rng = random.Random(seed * 31 + k)
    rows = k * rng.randint(1, 6)
    # Small lengths make ties common, which exercises the tie-breaking order.
    seqlens = [rng.randint(1, 12 if seed % 2 else 400) for _ in range(rows)]
    workloads = row_workloads(_mask(seqlens, 400))
    assert workloads == verl_balancing.calculate_workload(torch.tensor(seqlens)).tolist()
    assert balanced_groups(workloads, k) == _verl_layout(workloads, k)


@pytest.mark.parametrize("seed", range(20))
def test_unequal_size_partitions_equal_verls(seed: int) -> None:
    rng = random.Random(seed)
    values = [rng.randint(1, 50) for _ in range(rng.randint(4, 30))]
    k = rng.randint(1, 4)
    expected = verl_balancing.karmarkar_karp(values, k, equal_size=False)
    assert karmarkar_karp(values, k, equal_size=False) == [sorted(p) for p in expected]


def test_balancing_evens_out_the_ranks_tokens() -> None:
    # Each rank takes half of every mini-batch of 8: unbalanced, rank 0 gets every long row.
    seqlens = ([300] * 4 + [20] * 4) * 2
    mask = _mask(seqlens, 320)
    world, mini = 2, 8
    positions = [shard_rows(16, mini, rank, world) for rank in range(world)]
    order = balance_order(row_workloads(mask), positions)
    assert sorted(order) == list(range(16))
    reordered = mask[torch.tensor(order)]
    per_rank = [int(reordered[pos].sum()) for pos in positions]
    before = [int(mask[pos].sum()) for pos in positions]
    assert max(before) - min(before) > 0
    assert per_rank[0] == per_rank[1]
    after = [[order[p] for p in pos] for pos in positions]
    metrics = seqlen_balance_metrics(seqlens, positions, after)
    assert metrics["global_seqlen/minmax_diff"] == max(before) - min(before)
    assert metrics["global_seqlen/balanced_max"] == metrics["global_seqlen/balanced_min"]


@pytest.mark.parametrize("seed", range(10))
def test_metrics_equal_verls_when_ranks_take_contiguous_rows(seed: int) -> None:
    rng = random.Random(seed)
    k = rng.randint(1, 4)
    seqlens = [rng.randint(1, 200) for _ in range(k * rng.randint(1, 5))]
    workloads = row_workloads(_mask(seqlens, 200))
    rows = len(seqlens)
    # One mini-batch spanning the step: each rank's share is a contiguous block, as in verl.
    positions = [shard_rows(rows, rows, rank, k) for rank in range(k)]
    order = balance_order(workloads, positions)
    after = [[order[p] for p in pos] for pos in positions]
    ours = seqlen_balance_metrics(seqlens, positions, after)
    expected = verl_balancing.log_seqlen_unbalance(
        seqlen_list=seqlens, partitions=_verl_layout(workloads, k), prefix="global_seqlen"
    )
    assert ours == pytest.approx(expected)
    assert after == _verl_layout(workloads, k)
