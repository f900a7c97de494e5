"""Hand-computed advantages and returns for every built-in estimator."""

import math

import pytest
import torch

from kuberl_runtime.algorithms import compute_advantage

NAN = float("nan")
F64 = torch.float64


def t(rows):
    return torch.tensor(rows, dtype=F64)


def whiten_by_hand(tokens):
    """(x − μ)/√(σ²_unbiased + 1e-8) over a flat list of valid tokens."""
    n = len(tokens)
    mu = sum(tokens) / n
    var = sum((x - mu) ** 2 for x in tokens) / n * n / (n - 1)
    return [(x - mu) / math.sqrt(var + 1e-8) for x in tokens]


def test_gae_recursion_carries_over_padding_and_whitens_over_the_batch():
    # γ = 0.9, λ = 0.8 ⇒ γλ = 0.72. Row 0 has 2 valid tokens, then a pad holding garbage.
    rewards = t([[0.0, 1.0, NAN], [0.0, 0.0, 1.0]])
    values = t([[0.5, 0.2, NAN], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    advantages, returns = compute_advantage(
        "gae", token_level_rewards=rewards, response_mask=mask, values=values, gamma=0.9, lam=0.8
    )
    # row 0: t=1: δ = 1 + 0.9·0 − 0.2 = 0.8, A = 0.8
    #        t=0: δ = 0 + 0.9·0.2 − 0.5 = −0.32, A = −0.32 + 0.72·0.8 = 0.256
    # row 1: t=2: A = 1; t=1: δ = 0, A = 0.72·1 = 0.72; t=0: A = 0.72·0.72 = 0.5184
    raw = [0.256, 0.8, 0.5184, 0.72, 1.0]
    torch.testing.assert_close(returns, t([[0.256 + 0.5, 0.8 + 0.2, 0.0], [0.5184, 0.72, 1.0]]))
    w = whiten_by_hand(raw)
    torch.testing.assert_close(advantages, t([[w[0], w[1], 0.0], [w[2], w[3], w[4]]]))


def test_gae_needs_values():
    with pytest.raises(ValueError, match=r"gae.*critic values"):
        compute_advantage("gae", token_level_rewards=t([[1.0]]), response_mask=t([[1.0]]))


def test_reinforce_plus_plus_discounts_and_carries_over_masked_positions():
    # γ = 0.5. Row 0: trailing pad (garbage 7). Row 1: a masked span in the middle.
    rewards = t([[1.0, 3.0, 7.0], [1.0, 5.0, 2.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 1]])
    advantages, returns = compute_advantage(
        "reinforce_plus_plus", token_level_rewards=rewards, response_mask=mask, gamma=0.5
    )
    # row 0: G1 = 3, G0 = 1 + 0.5·3 = 2.5. row 1: G2 = 2; t=1 is masked: skipped (its 5 is not
    # added) and the running return carried past it, so G0 = 1 + 0.5·2 = 2 (verl 0.9.1).
    torch.testing.assert_close(returns, t([[2.5, 3.0, 0.0], [2.0, 0.0, 2.0]]))
    w = whiten_by_hand([2.5, 3.0, 2.0, 2.0])
    torch.testing.assert_close(advantages, t([[w[0], w[1], 0.0], [w[2], 0.0, w[3]]]))


def test_remax_subtracts_the_greedy_baseline_from_the_return_to_go():
    rewards = t([[0.0, 1.0, NAN], [2.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    advantages, returns = compute_advantage(
        "remax", token_level_rewards=rewards, response_mask=mask, reward_baselines=t([0.5, 3.0])
    )
    # returns-to-go: row 0 [1, 1], row 1 [2]; minus b = 0.5 and 3
    torch.testing.assert_close(returns, t([[1.0, 1.0, 0.0], [2.0, 0.0, 0.0]]))
    torch.testing.assert_close(advantages, t([[0.5, 0.5, 0.0], [-1.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="reward_baselines"):
        compute_advantage("remax", token_level_rewards=rewards, response_mask=mask)


# Outcome scores per row and their uid; groups are interleaved to prove grouping is by uid.
# group a: [1, 0]; group b: [3, 1, 2]; group c (singleton): [4]
SCORES = [1.0, 3.0, 0.0, 1.0, 4.0, 2.0]
UIDS = ["a", "b", "a", "b", "c", "b"]
LENGTHS = [1, 2, 3, 1, 2, 3]


def outcome_batch(scores=SCORES, lengths=LENGTHS, width=3):
    """Reward on the last valid token (as the reward manager writes it), garbage in the padding."""
    rewards = torch.full((len(scores), width), NAN, dtype=F64)
    mask = torch.zeros(len(scores), width, dtype=torch.long)
    for row, (score, length) in enumerate(zip(scores, lengths, strict=True)):
        rewards[row, :length] = 0.0
        rewards[row, length - 1] = score
        mask[row, :length] = 1
    return rewards, mask


def per_row(advantages, mask):
    """The scalar each row got, checking it was broadcast over exactly its valid tokens."""
    first = advantages[:, 0]
    torch.testing.assert_close(advantages, first.unsqueeze(-1) * mask)
    return first.tolist()


def run(name, **kwargs):
    rewards, mask = outcome_batch()
    advantages, returns = compute_advantage(
        name, token_level_rewards=rewards, response_mask=mask, index=UIDS, **kwargs
    )
    torch.testing.assert_close(advantages, returns)
    return per_row(advantages, mask)


def test_grpo_normalises_by_the_unbiased_group_std():
    # a: μ = 0.5, σ = √((0.25 + 0.25)/1) = 0.70710678; b: μ = 2, σ = √((1 + 1 + 0)/2) = 1
    # c: singleton ⇒ μ = 0, σ = 1
    sa = math.sqrt(0.5)
    expected = [0.5 / (sa + 1e-6), 1 / (1 + 1e-6), -0.5 / (sa + 1e-6), -1 / (1 + 1e-6)]
    expected += [4 / (1 + 1e-6), 0.0]
    assert run("grpo") == pytest.approx(expected)


def test_grpo_without_std_norm_is_dr_grpo():
    assert run("grpo", norm_adv_by_std_in_grpo=False) == pytest.approx([0.5, 1, -0.5, -1, 4, 0])


def test_grpo_passk_credits_only_the_best_of_each_group():
    rewards, mask = outcome_batch(scores=[1.0, 3.0, 0.0, 1.0, 2.0, 2.0], lengths=[1, 2, 3, 1, 2, 3])
    uids = ["a", "b", "a", "b", "d", "b"]  # b = [3, 1, 2]; a = [1, 0]; d is a single sample...
    with pytest.raises(ValueError, match="at least 2 responses"):
        compute_advantage("grpo_passk", token_level_rewards=rewards, response_mask=mask, index=uids)
    uids = ["a", "b", "a", "b", "a", "b"]  # a = [1, 0, 2]; b = [3, 1, 2]
    advantages, _ = compute_advantage(
        "grpo_passk", token_level_rewards=rewards, response_mask=mask, index=uids
    )
    # a: best 2 (row 4), second 1 ⇒ gap 1, σ_a = 1; b: best 3 (row 1), second 2 ⇒ gap 1, σ_b = 1
    assert per_row(advantages, mask) == pytest.approx([0, 1 / (1 + 1e-6), 0, 0, 1 / (1 + 1e-6), 0])
    advantages, _ = compute_advantage(
        "grpo_passk",
        token_level_rewards=rewards,
        response_mask=mask,
        index=uids,
        norm_adv_by_std_in_grpo=False,
    )
    assert per_row(advantages, mask) == pytest.approx([0, 1, 0, 0, 1, 0])


def test_rloo_subtracts_the_mean_of_the_other_samples():
    # a: 1 − 0 = 1, 0 − 1 = −1; b: 3 − (1+2)/2 = 1.5, 1 − 2.5 = −1.5, 2 − 2 = 0; c alone keeps 4
    assert run("rloo") == pytest.approx([1.0, 1.5, -1.0, -1.5, 4.0, 0.0])


def test_reinforce_plus_plus_baseline_whitens_group_centred_scores_over_all_tokens():
    # centred: a ±0.5; b: 1, −1, 0; c: 4 − 0 = 4. Broadcast over LENGTHS tokens, then whitened
    # with μ, σ of all 12 tokens (not per group).
    centred = [0.5, 1.0, -0.5, -1.0, 4.0, 0.0]
    tokens = [c for c, n in zip(centred, LENGTHS, strict=True) for _ in range(n)]
    mu = sum(tokens) / 12  # (0.5 − 0.5·3 + 1·2 − 1·1 + 4·2 + 0)/12 = 8/12
    var = sum((x - mu) ** 2 for x in tokens) / 11
    expected = [(c - mu) / math.sqrt(var + 1e-8) for c in centred]
    assert run("reinforce_plus_plus_baseline") == pytest.approx(expected)
    assert mu == pytest.approx(8 / 12)


def test_opo_uses_a_length_weighted_baseline():
    # a: lengths 1, 3 ⇒ b = (1·1 + 3·0)/4 = 0.25; b: lengths 2, 1, 3 ⇒ (2·3 + 1·1 + 3·2)/6 = 13/6
    b_b = 13 / 6
    assert run("opo") == pytest.approx([0.75, 3 - b_b, -0.25, 1 - b_b, 4.0, 2 - b_b])


def test_gpg_scales_by_the_share_of_nonzero_scores():
    # 5 of 6 scores are non-zero ⇒ α = 6/5; centred as in GRPO without std (c: 4 − 0)
    alpha = 6 / 5
    expected = [alpha * x for x in [0.5, 1.0, -0.5, -1.0, 4.0, 0.0]]
    assert run("gpg") == pytest.approx(expected)


def test_uids_may_be_an_int_tensor():
    rewards, mask = outcome_batch()
    advantages, _ = compute_advantage(
        "rloo",
        token_level_rewards=rewards,
        response_mask=mask,
        index=torch.tensor([7, 3, 7, 3, 5, 3]),
    )
    assert per_row(advantages, mask) == pytest.approx([1.0, 1.5, -1.0, -1.5, 4.0, 0.0])


def test_group_estimators_need_the_uids():
    rewards, mask = outcome_batch()
    with pytest.raises(ValueError, match=r"grpo.*index"):
        compute_advantage("grpo", token_level_rewards=rewards, response_mask=mask)
    with pytest.raises(ValueError, match="uids for 6 rows"):
        compute_advantage("grpo", token_level_rewards=rewards, response_mask=mask, index=["a"])
