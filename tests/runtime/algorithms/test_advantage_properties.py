"""Invariants of the advantage estimators over generated batches (hypothesis)."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kuberl_runtime.algorithms import ADVANTAGE_ESTIMATORS, compute_advantage

BUILT_IN = [
    "gae",
    "gpg",
    "grpo",
    "grpo_passk",
    "opo",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "remax",
    "rloo",
]
# Rewards on a quarter grid: the discrete values reward functions actually produce.
quarter = st.integers(-8, 8).map(lambda x: x / 4)


@st.composite
def batches(draw, equal_rewards_in_group=False):
    """A right-padded batch in float64 whose groups (uids) all hold ≥ 2 samples."""
    sizes = draw(st.lists(st.integers(2, 3), min_size=1, max_size=3))
    uids = draw(st.permutations([g for g, size in enumerate(sizes) for _ in range(size)]))
    rows, width = len(uids), draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(1, width), min_size=rows, max_size=rows))
    # Arbitrary floats here: a naive group mean of equal values can miss them by an ulp.
    any_score = st.floats(-5, 5, allow_nan=False, allow_subnormal=False)
    group_score = draw(st.lists(any_score, min_size=len(sizes), max_size=len(sizes)))
    mask = torch.zeros(rows, width, dtype=torch.long)
    rewards = torch.zeros(rows, width, dtype=torch.float64)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
        rewards[row, :length] = torch.tensor(
            draw(st.lists(quarter, min_size=length, max_size=length)), dtype=torch.float64
        )
        if equal_rewards_in_group:
            rewards[row, :length] = 0.0
            rewards[row, length - 1] = group_score[uids[row]]
    values = torch.tensor(
        draw(st.lists(quarter, min_size=rows * width, max_size=rows * width)), dtype=torch.float64
    ).reshape(rows, width)
    baselines = torch.tensor(draw(st.lists(quarter, min_size=rows, max_size=rows)))
    return dict(
        token_level_rewards=rewards,
        response_mask=mask,
        index=list(uids),
        values=values * mask,
        reward_baselines=baselines.double(),
    )


def pad_right(batch, extra):
    """Append `extra` padding columns full of NaN (the pads' content must never matter)."""
    padded = dict(batch)
    for key in ("token_level_rewards", "values"):
        garbage = torch.full((batch[key].shape[0], extra), float("nan"), dtype=torch.float64)
        padded[key] = torch.cat([batch[key], garbage], dim=-1)
    zeros = torch.zeros(batch["response_mask"].shape[0], extra, dtype=torch.long)
    padded["response_mask"] = torch.cat([batch["response_mask"], zeros], dim=-1)
    return padded


def test_every_built_in_estimator_is_registered():
    assert set(BUILT_IN) <= set(ADVANTAGE_ESTIMATORS.names())


@settings(max_examples=60, deadline=None)
@given(batch=batches(), extra=st.integers(1, 3), name=st.sampled_from(BUILT_IN))
def test_right_padding_never_changes_advantages_or_returns(batch, extra, name):
    if int(batch["response_mask"].sum()) < 2:  # whitening needs two tokens
        batch["response_mask"][0, 0] = batch["response_mask"][-1, 0] = 1
    width = batch["response_mask"].shape[1]
    advantages, returns = compute_advantage(name, gamma=0.9, lam=0.95, **batch)
    padded_adv, padded_ret = compute_advantage(name, gamma=0.9, lam=0.95, **pad_right(batch, extra))
    torch.testing.assert_close(padded_adv[:, :width], advantages)
    torch.testing.assert_close(padded_ret[:, :width], returns)
    assert not padded_adv[:, width:].any() and not padded_ret[:, width:].any()


@settings(max_examples=60, deadline=None)
@given(batch=batches(), data=st.data(), norm=st.booleans())
def test_grpo_is_invariant_to_permuting_rows_and_renaming_groups(batch, data, norm):
    rows = len(batch["index"])
    perm = data.draw(st.permutations(range(rows)))
    renamed = {uid: f"prompt-{data.draw(st.integers(0, 10**6))}-{uid}" for uid in batch["index"]}
    shuffled = dict(
        token_level_rewards=batch["token_level_rewards"][list(perm)],
        response_mask=batch["response_mask"][list(perm)],
        index=[renamed[batch["index"][i]] for i in perm],
    )
    advantages, _ = compute_advantage("grpo", norm_adv_by_std_in_grpo=norm, **batch)
    shuffled_adv, _ = compute_advantage("grpo", norm_adv_by_std_in_grpo=norm, **shuffled)
    torch.testing.assert_close(shuffled_adv, advantages[list(perm)])


@settings(max_examples=60, deadline=None)
@given(
    batch=batches(equal_rewards_in_group=True),
    name=st.sampled_from(["grpo", "grpo_passk", "rloo", "opo", "gpg"]),
    norm=st.booleans(),
)
def test_equal_rewards_in_a_group_give_exactly_zero_advantage(batch, name, norm):
    advantages, _ = compute_advantage(name, norm_adv_by_std_in_grpo=norm, **batch)
    assert torch.equal(advantages, torch.zeros_like(advantages))
