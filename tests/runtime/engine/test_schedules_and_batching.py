"""LR schedules, micro-batching by token budget, and per-rank shares of mini-batches."""

from __future__ import annotations

import pytest
import torch

from kuberl_api.plan.standalone import optim_plan
from kuberl_runtime.engine.optim import clip_and_step, lr_multiplier, warmup_steps
from kuberl_runtime.engine.packing import fixed_micro_batches, token_budget_micro_batches
from kuberl_runtime.trainer.batch import shard_rows


def test_constant_schedule_warms_up_linearly():
    optim = optim_plan({"lr_warmup_steps": 4, "lr_scheduler_type": "constant"})
    values = [lr_multiplier(s, warmup=4, total=10, optim=optim) for s in range(6)]
    assert values == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]


def test_cosine_schedule_ends_at_min_lr_ratio():
    optim = optim_plan({"lr_scheduler_type": "cosine", "min_lr_ratio": 0.1})
    assert lr_multiplier(0, warmup=0, total=10, optim=optim) == pytest.approx(1.0)
    assert lr_multiplier(5, warmup=0, total=10, optim=optim) == pytest.approx(0.55)
    assert lr_multiplier(10, warmup=0, total=10, optim=optim) == pytest.approx(0.1)


def test_warmup_ratio_is_used_when_steps_are_unset():
    assert warmup_steps(optim_plan({"lr_warmup_steps_ratio": 0.2}), 50) == 10
    assert warmup_steps(optim_plan({"lr_warmup_steps": 3, "lr_warmup_steps_ratio": 0.2}), 50) == 3


def test_non_finite_gradients_skip_the_step():
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    before = model.weight.detach().clone()
    model(torch.tensor([[float("inf"), 1.0]])).sum().backward()
    norm, stepped = clip_and_step(model, optimizer, max_norm=1.0)
    assert not stepped and not torch.isfinite(torch.tensor(norm))
    assert torch.equal(model.weight, before)
    assert all(p.grad is None for p in model.parameters())


def test_token_budget_groups_cover_every_row_once():
    mask = torch.zeros(6, 10, dtype=torch.long)
    for row, length in enumerate([10, 2, 9, 3, 8, 4]):
        mask[row, :length] = 1
    groups = token_budget_micro_batches(mask, max_tokens=12)
    assert sorted(r for g in groups for r in g) == list(range(6))
    assert len(groups) == 3  # ceil(36 / 12)
    with pytest.raises(ValueError, match="smaller than one padded sequence"):
        token_budget_micro_batches(mask, max_tokens=5)


def test_fixed_micro_batches():
    assert fixed_micro_batches(5, 2) == [[0, 1], [2, 3], [4]]


def test_each_rank_gets_its_share_of_every_mini_batch():
    assert shard_rows(8, 4, rank=0, world_size=2) == [0, 1, 4, 5]
    assert shard_rows(8, 4, rank=1, world_size=2) == [2, 3, 6, 7]
    assert shard_rows(8, 8, rank=0, world_size=1) == list(range(8))
