"""ROLL's RLVR options (reward_clip, advantage_clip, norm types, max_len/difficulty masks), by hand.

The expected numbers follow ROLL's rlvr pipeline (roll/utils/functionals.py: reward_norm,
difficulty_mask, get_sample_level_mask, reward_postprocess, compute_token_reward,
compute_advantage), computed here independently.
"""

from __future__ import annotations

import pytest
import torch

from kuberl_runtime.algorithms.masked import masked_whiten
from kuberl_runtime.algorithms.roll_rlvr import (
    RollRLVROptions,
    normalize_scores,
    roll_advantages,
    sample_mask,
    shape_scores,
)

UIDS = ["a", "a", "b", "b"]
SCORES = torch.tensor([1.0, 0.0, 3.0, 5.0], dtype=torch.float64)


def test_batch_and_group_normalisation_use_the_unbiased_std_plus_1e_6():
    batch = normalize_scores(SCORES, UIDS, "batch", "batch")
    expected = (SCORES - SCORES.mean()) / (SCORES.std() + 1e-6)
    torch.testing.assert_close(batch, expected)
    group = normalize_scores(SCORES, UIDS, "group", "group")
    std_a, std_b = torch.tensor([1.0, 0.0]).std(), torch.tensor([3.0, 5.0]).std()
    torch.testing.assert_close(
        group,
        torch.tensor(
            [0.5 / (std_a + 1e-6), -0.5 / (std_a + 1e-6), -1 / (std_b + 1e-6), 1 / (std_b + 1e-6)],
            dtype=torch.float64,
        ),
    )
    # mean only, and std only (ROLL then divides the raw score by the std)
    torch.testing.assert_close(
        normalize_scores(SCORES, UIDS, "group", None),
        SCORES - torch.tensor([0.5, 0.5, 4.0, 4.0], dtype=torch.float64),
    )
    torch.testing.assert_close(
        normalize_scores(SCORES, UIDS, None, "batch"), SCORES / (SCORES.std() + 1e-6)
    )
    torch.testing.assert_close(normalize_scores(SCORES, UIDS, None, None), SCORES)


def test_group_std_needs_two_responses_per_prompt():
    with pytest.raises(ValueError, match="at least 2 responses per prompt"):
        normalize_scores(SCORES, ["a", "b", "c", "c"], None, "group")


def test_max_len_and_difficulty_masks():
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]])
    scores = torch.tensor([1.0, 1.0, 0.0, 1.0])  # prompt a solved always, prompt b half the time
    options = RollRLVROptions(
        max_len_mask=True,
        difficulty_mask=True,
        difficulty_low_threshold=0.1,
        difficulty_high_threshold=0.95,
    )
    keep, metrics = sample_mask(scores, mask, UIDS, 3, options)
    # rows 0 and 3 hit the length (truncated); prompt a (mean 1.0) is too easy
    assert keep.tolist() == [False, False, True, False]
    assert metrics["actor/max_len_mask_ratio"] == 0.5
    assert metrics["actor/difficulty_mask_ratio"] == 0.5
    assert metrics["actor/samples_used"] == 1.0


def test_shape_scores_normalises_clips_and_keeps_the_score_on_the_last_token():
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]], dtype=torch.float64)
    token_scores = torch.zeros(4, 3, dtype=torch.float64)
    token_scores[[0, 1, 2, 3], [1, 0, 2, 1]] = SCORES
    options = RollRLVROptions(norm_mean_type="batch", reward_clip=1.5)
    shaped = shape_scores(token_scores, mask, UIDS, 3, "reinforce_plus_plus", options)
    expected = (SCORES - SCORES.mean()).clamp(-1.5, 1.5)  # [-1.25, -2.25→-1.5, 0.75, 2.75→1.5]
    assert shaped.token_level_scores.sum(-1).tolist() == expected.tolist()
    assert shaped.token_level_scores[[0, 1, 2, 3], [1, 0, 2, 1]].tolist() == expected.tolist()
    assert shaped.metrics["critic/reward_clip_frac"] == 0.5


def test_grpo_is_forced_to_group_normalisation_like_roll():
    options = RollRLVROptions(reward_clip=10.0)
    assert options.norm_types("grpo") == ("group", "group")
    assert options.norm_types("reinforce_plus_plus") == (None, None)


def test_masked_rows_leave_the_whitening_and_advantages_are_clipped():
    rewards = torch.zeros(4, 3, dtype=torch.float64)
    rewards[:, 1] = torch.tensor([1.0, 4.0, 0.0, 2.0], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0]] * 4, dtype=torch.float64)
    keep = torch.tensor([True, False, True, True])
    options = RollRLVROptions(advantage_clip=1.0)
    advantages, _, final_mask, metrics = roll_advantages(
        "reinforce_plus_plus",
        token_level_rewards=rewards,
        response_mask=mask,
        sample_keep=keep,
        options=options,
        gamma=1.0,
    )
    assert final_mask[1].sum() == 0 and advantages[1].abs().sum() == 0
    returns = torch.tensor([[1.0, 1.0, 0], [0, 0, 0], [0.0, 0.0, 0], [2.0, 2.0, 0]])
    whitened = masked_whiten(returns.to(torch.float64), final_mask) * final_mask
    torch.testing.assert_close(advantages, whitened.clamp(-1.0, 1.0))
    assert metrics["critic/advantage_clip_frac"] == pytest.approx(
        float((whitened.abs() > 1.0).sum()) / 12
    )


def test_grpo_group_statistics_include_masked_rows():
    rewards = torch.zeros(4, 2, dtype=torch.float64)
    rewards[:, 1] = SCORES
    mask = torch.ones(4, 2, dtype=torch.float64)
    keep = torch.tensor([True, False, True, True])
    advantages, _, _, _ = roll_advantages(
        "grpo",
        token_level_rewards=rewards,
        response_mask=mask,
        sample_keep=keep,
        options=RollRLVROptions(max_len_mask=True),
        index=UIDS,
    )
    std_a = torch.tensor([1.0, 0.0]).std().item()
    assert advantages[0, 0].item() == pytest.approx(0.5 / (std_a + 1e-6))
    assert advantages[1].abs().sum() == 0


def test_a_step_with_every_response_masked_has_nothing_to_learn_from():
    advantages, returns, final_mask, metrics = roll_advantages(
        "reinforce_plus_plus",
        token_level_rewards=torch.ones(2, 2),
        response_mask=torch.ones(2, 2),
        sample_keep=torch.tensor([False, False]),
        options=RollRLVROptions(max_len_mask=True),
    )
    assert not final_mask.any() and not advantages.any() and not returns.any()
    assert metrics["mask/final_mask_sum_eq_0"] == 1.0
