"""`DynamicSampler.fill`: generation batches until train_batch_size groups with signal, verl's
limit error, and a partial step that survives a kill (sampler cursor, kept rows, RNG)."""

from __future__ import annotations

import pytest
import torch

from kuberl_api.plan.sections import FilterGroupsPlan
from kuberl_runtime.data.sampler import PromptBatchSampler
from kuberl_runtime.distributed import RankInfo
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.dynamic_sampling import PARTIAL_FILE, DynamicSampler

N = 2  # responses per prompt
ONE_RANK = RankInfo(rank=0, world_size=1, local_rank=0)


class Generator:
    """Stands in for generate + score: prompts with an even index score the same twice (a
    constant group), odd ones score 0 and 1. Records the generation batches it was asked for."""

    def __init__(self, sampler: PromptBatchSampler, fail_at: int | None = None) -> None:
        self.sampler, self.fail_at, self.calls = sampler, fail_at, []

    def __call__(self, index: int) -> tuple[Batch, list[float]]:
        if index == self.fail_at:
            raise RuntimeError("killed")
        self.calls.append(index)
        prompts = self.sampler.next_batch()
        rows = [p for p in prompts for _ in range(N)]
        values = [1.0 if p % 2 == 0 else float(r % 2) for r, p in enumerate(rows)]
        batch = Batch(
            {"prompt": torch.tensor(rows), "noise": torch.rand(len(rows))},
            {"uid": [f"{index}:{p}" for p in rows]},
        )
        return batch, values


def _sampler() -> PromptBatchSampler:
    return PromptBatchSampler(40, 3, shuffle=True, seed=7)


def _dynamic(tmp_path, limit=0, save=True) -> DynamicSampler:
    options = FilterGroupsPlan(enable=True, metric="acc", max_num_gen_batches=limit)
    return DynamicSampler(
        options, train_batch_size=4, n=N, ranks=ONE_RANK, checkpoint_dir=tmp_path, save_partial=save
    )


def test_fills_the_batch_with_groups_that_vary(tmp_path):
    sampler = _sampler()
    order = sampler.epoch_order(0).tolist()
    gen = Generator(sampler)
    batch, metrics = _dynamic(tmp_path).fill(1, sampler, gen)
    assert len(batch) == 4 * N
    drawn = order[: 3 * len(gen.calls)]
    odd = [p for p in drawn if p % 2 == 1]
    # the first four odd prompts in sampling order, each with both responses
    assert batch["prompt"].tolist() == [p for p in odd[:4] for _ in range(N)]
    assert metrics["train/num_gen_batches"] == len(gen.calls) > 1
    assert metrics["training/filter_groups/kept_ratio"] == len(odd) / len(drawn) < 1
    assert metrics["training/filter_groups/evicted_samples"] == len(drawn) - len(odd)
    assert metrics["training/filter_groups/discarded_surplus_samples"] == len(odd) - 4
    assert sampler.batch_in_epoch == len(gen.calls)  # every generation batch moved the cursor
    assert not (tmp_path / PARTIAL_FILE).exists()  # gone once the step is full


def test_the_limit_raises_verls_error_with_the_fix(tmp_path):
    sampler = _sampler()
    with pytest.raises(ValueError, match=r"max_num_gen_batches=1\).*set it to 0 for no limit"):
        _dynamic(tmp_path, limit=1).fill(1, sampler, Generator(sampler))


def test_a_killed_step_continues_from_its_partial_batch(tmp_path):
    torch.manual_seed(0)
    sampler = _sampler()
    expected, expected_metrics = _dynamic(tmp_path / "a").fill(5, sampler, Generator(sampler))
    expected_cursor, expected_next_rand = sampler.state_dict(), torch.rand(3)

    torch.manual_seed(0)
    sampler = _sampler()
    with pytest.raises(RuntimeError, match="killed"):
        _dynamic(tmp_path / "b").fill(5, sampler, Generator(sampler, fail_at=1))
    assert (tmp_path / "b" / PARTIAL_FILE).is_file()

    # A new process: the checkpoint of step 4 restores the sampler as it was before step 5.
    torch.manual_seed(123)
    sampler = _sampler()
    resumed = _dynamic(tmp_path / "b")
    resumed.resume_after(4)
    gen = Generator(sampler)
    batch, metrics = resumed.fill(5, sampler, gen)
    assert gen.calls[0] == 1  # generation batch 0 came from the partial step
    assert metrics == expected_metrics
    assert all(torch.equal(batch[k], expected[k]) for k in expected.tensors)
    assert batch.objects == expected.objects
    assert sampler.state_dict() == expected_cursor
    assert torch.equal(torch.rand(3), expected_next_rand)


def test_a_partial_step_of_another_step_or_without_resume_is_ignored(tmp_path):
    sampler = _sampler()
    with pytest.raises(RuntimeError):
        _dynamic(tmp_path).fill(5, sampler, Generator(sampler, fail_at=1))
    for resume_at in (None, 5):  # not resumed; resumed from step 5 (the next step is 6)
        sampler = _sampler()
        dynamic = _dynamic(tmp_path)
        if resume_at is not None:
            dynamic.resume_after(resume_at)
        gen = Generator(sampler, fail_at=1)
        with pytest.raises(RuntimeError):
            dynamic.fill(5 if resume_at is None else 6, sampler, gen)
        assert gen.calls == [0]
