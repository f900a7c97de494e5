from __future__ import annotations

import json
from itertools import islice

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kuberl_runtime.data import DataError, PromptBatchSampler


def _take(sampler: PromptBatchSampler, num_batches: int) -> list[list[int]]:
    return [sampler.next_batch() for _ in range(num_batches)]


def _resumed_run(stop_after: int, total: int, **kwargs) -> list[list[int]]:
    """Take `stop_after` batches, checkpoint through JSON, restore into a fresh sampler, go on."""
    first = PromptBatchSampler(**kwargs)
    before = _take(first, stop_after)
    state = json.loads(json.dumps(first.state_dict()))
    second = PromptBatchSampler(**kwargs)
    second.load_state_dict(state)
    return before + _take(second, total - stop_after)


def test_same_seed_same_batches_other_seed_differs() -> None:
    runs = [_take(PromptBatchSampler(10, 3, seed=seed), 6) for seed in (1, 1, 2)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_each_epoch_is_a_new_permutation_cut_into_full_batches() -> None:
    sampler = PromptBatchSampler(10, 3, seed=0)
    assert sampler.steps_per_epoch == 3
    epochs = [_take(sampler, 3) for _ in range(3)]
    for epoch, batches in enumerate(epochs):
        flat = [i for batch in batches for i in batch]
        assert all(len(batch) == 3 for batch in batches)
        assert len(set(flat)) == 9  # drop_last leaves one sample out, none repeated
        assert flat == sampler.epoch_order(epoch)[:9].tolist()
    assert epochs[0] != epochs[1] != epochs[2]


def test_null_seed_means_seed_zero() -> None:
    assert _take(PromptBatchSampler(9, 3, seed=None), 4) == _take(PromptBatchSampler(9, 3), 4)


def test_no_shuffle_visits_in_file_order_every_epoch() -> None:
    sampler = PromptBatchSampler(5, 2, shuffle=False)
    assert _take(sampler, 4) == [[0, 1], [2, 3], [0, 1], [2, 3]]


def test_keep_last_partial_batch_when_drop_last_is_off() -> None:
    sampler = PromptBatchSampler(5, 2, shuffle=False, drop_last=False)
    assert _take(sampler, 4) == [[0, 1], [2, 3], [4], [0, 1]]


def test_epoch_batches_yields_the_rest_of_the_epoch() -> None:
    sampler = PromptBatchSampler(8, 2, shuffle=False)
    sampler.next_batch()
    assert list(sampler.epoch_batches()) == [[2, 3], [4, 5], [6, 7]]
    assert (sampler.epoch, sampler.batch_in_epoch) == (1, 0)
    assert list(sampler.epoch_batches()) == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_iter_is_endless_across_epochs() -> None:
    batches = list(islice(iter(PromptBatchSampler(4, 2, shuffle=False)), 5))
    assert batches == [[0, 1], [2, 3], [0, 1], [2, 3], [0, 1]]


@pytest.mark.parametrize("stop_after", range(0, 13))
def test_resume_matches_uninterrupted_run(stop_after: int) -> None:
    # 10 samples / batch 3 = 3 steps per epoch, so stops 3, 6, 9, 12 land on epoch boundaries.
    kwargs = {"num_samples": 10, "batch_size": 3, "seed": 5}
    assert _resumed_run(stop_after, 13, **kwargs) == _take(PromptBatchSampler(**kwargs), 13)


def test_checkpoint_at_end_of_epoch_resumes_into_next_epoch_not_an_empty_one() -> None:
    sampler = PromptBatchSampler(6, 2, seed=0)
    _take(sampler, 3)
    state = sampler.state_dict()
    assert (state["epoch"], state["batch_in_epoch"]) == (1, 0)
    resumed = PromptBatchSampler(6, 2, seed=0)
    resumed.load_state_dict(state)
    # The epoch loop of a trainer must get a full epoch, not zero batches.
    assert len(list(resumed.epoch_batches())) == 3


def test_state_with_exhausted_epoch_is_normalised() -> None:
    # Another tool might save (epoch 0, batch 3 of 3); that is the start of epoch 1.
    sampler = PromptBatchSampler(6, 2, seed=0)
    state = sampler.state_dict() | {"epoch": 0, "batch_in_epoch": 3}
    sampler.load_state_dict(state)
    assert (sampler.epoch, sampler.batch_in_epoch) == (1, 0)
    assert sampler.next_batch() == sampler.epoch_order(1)[:2].tolist()


@given(
    num_samples=st.integers(1, 30),
    batch_size=st.integers(1, 8),
    seed=st.integers(0, 2**31),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
    stop_after=st.integers(0, 20),
)
def test_resume_never_repeats_or_skips(
    num_samples, batch_size, seed, shuffle, drop_last, stop_after
):
    if drop_last and batch_size > num_samples:
        batch_size = num_samples
    kwargs = {
        "num_samples": num_samples,
        "batch_size": batch_size,
        "seed": seed,
        "shuffle": shuffle,
        "drop_last": drop_last,
    }
    expected = _take(PromptBatchSampler(**kwargs), 20)
    assert _resumed_run(stop_after, 20, **kwargs) == expected


def test_num_batches_taken_counts_steps() -> None:
    sampler = PromptBatchSampler(7, 2, seed=0)
    _take(sampler, 5)
    assert sampler.num_batches_taken == 5


def test_resume_with_different_data_is_refused() -> None:
    state = PromptBatchSampler(10, 2).state_dict()
    with pytest.raises(DataError, match=r"num_samples=10 but this run has num_samples=12"):
        PromptBatchSampler(12, 2).load_state_dict(state)


def test_corrupt_position_is_refused() -> None:
    sampler = PromptBatchSampler(10, 2)
    with pytest.raises(DataError, match="corrupt"):
        sampler.load_state_dict(sampler.state_dict() | {"batch_in_epoch": 9})


def test_batch_larger_than_dataset_is_explained() -> None:
    with pytest.raises(DataError, match=r"train_batch_size=8 is larger than the dataset \(5"):
        PromptBatchSampler(5, 8)
    with pytest.raises(DataError, match=r"lower data.gen_batch_size or add data"):
        PromptBatchSampler(5, 8, batch_key="data.gen_batch_size")
