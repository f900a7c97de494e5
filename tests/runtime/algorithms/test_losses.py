"""Policy losses, value loss and loss aggregation by hand, plus the clip-inactive property."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kuberl_runtime.algorithms import (
    LOSS_AGG_MODES,
    agg_loss,
    compute_policy_loss,
    value_loss,
)

NAN = float("nan")


def ppo_batch(ratios, advantages):
    """One row; log π_old = 0 so log π_θ = ln ρ; one extra padded token full of garbage."""
    log_prob = torch.tensor([[*(math.log(r) for r in ratios), NAN]], dtype=torch.float64)
    advantages = torch.tensor([[*advantages, NAN]], dtype=torch.float64)
    mask = torch.tensor([[1] * len(ratios) + [0]])
    return dict(
        old_log_prob=torch.zeros_like(log_prob),
        log_prob=log_prob,
        advantages=advantages,
        response_mask=mask,
    )


RATIOS = [1.5, 0.5, 0.5, 1.5, 5.0]
ADVANTAGES = [1.0, 1.0, -1.0, -1.0, -1.0]


def test_vanilla_ppo_clip_and_dual_clip_by_hand():
    loss, metrics = compute_policy_loss(
        "vanilla", **ppo_batch(RATIOS, ADVANTAGES), clip_ratio=0.2, clip_ratio_c=3.0
    )
    # A=+1 ρ=1.5: max(−1.5, −1.2) = −1.2 (clipped)   A=+1 ρ=0.5: max(−0.5, −0.8) = −0.5
    # A=−1 ρ=0.5: max(0.5, 0.8) = 0.8 (clipped)      A=−1 ρ=1.5: max(1.5, 1.2) = 1.5
    # A=−1 ρ=5:   max(5, 1.2) = 5 > c·|A| = 3 ⇒ dual clip gives 3
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 0.8 + 1.5 + 3.0) / 5)
    assert metrics["actor/pg_loss"].item() == pytest.approx(0.72)
    assert metrics["actor/pg_clipfrac"].item() == pytest.approx(2 / 5)
    assert metrics["actor/pg_clipfrac_lower"].item() == pytest.approx(1 / 5)
    # ppo_kl = mean(log π_old − log π_θ) = −mean(ln ρ)
    expected_kl = -sum(math.log(r) for r in RATIOS) / 5
    assert metrics["actor/ppo_kl"].item() == pytest.approx(expected_kl)


def test_clip_ratio_applies_when_low_and_high_are_unset():
    batch = ppo_batch([1.5], [1.0])
    # verl would ignore clip_ratio (its low/high default to 0.2); here ε = 0.1: max(−1.5, −1.1)
    loss, _ = compute_policy_loss("vanilla", **batch, clip_ratio=0.1)
    assert loss.item() == pytest.approx(-1.1)
    # An explicit clip_ratio_high wins over clip_ratio: max(−1.5, −1.3)
    loss, _ = compute_policy_loss("vanilla", **batch, clip_ratio=0.1, clip_ratio_high=0.3)
    assert loss.item() == pytest.approx(-1.3)


def test_asymmetric_clip_uses_the_low_side_for_shrinking_ratios():
    batch = ppo_batch([0.5], [-1.0])
    # ε_low = 0.4: −A·clip(0.5, 0.6, 1.2) = 0.6 > 0.5
    loss, _ = compute_policy_loss("vanilla", **batch, clip_ratio_low=0.4, clip_ratio_high=0.2)
    assert loss.item() == pytest.approx(0.6)


def test_dual_clip_constant_must_exceed_one():
    with pytest.raises(ValueError, match="clip_ratio_c must be > 1"):
        compute_policy_loss("vanilla", **ppo_batch([1.0], [1.0]), clip_ratio_c=1.0)


def test_rollout_importance_weights_scale_each_token():
    batch = ppo_batch([1.0, 1.0], [1.0, 2.0])
    weights = torch.tensor([[0.5, 2.0, NAN]], dtype=torch.float64)
    loss, _ = compute_policy_loss("vanilla", **batch, rollout_is_weights=weights)
    # token losses −1·1·0.5 and −2·1·2 ⇒ mean (−0.5 − 4)/2
    assert loss.item() == pytest.approx(-2.25)


def test_gspo_uses_the_sequence_ratio_with_token_gradients():
    log_prob = torch.tensor([[0.2, 0.0], [-0.1, -0.1]], dtype=torch.float64, requires_grad=True)
    batch = dict(
        old_log_prob=torch.zeros(2, 2, dtype=torch.float64),
        log_prob=log_prob,
        advantages=torch.tensor([[1.0, 1.0], [-1.0, -1.0]], dtype=torch.float64),
        response_mask=torch.ones(2, 2),
    )
    loss, metrics = compute_policy_loss(
        "gspo", **batch, clip_ratio=0.05, loss_agg_mode="token-mean"
    )
    # row 0: s = e^{(0.2+0)/2} = e^0.1 = 1.105 → clipped to 1.05 ⇒ −1.05 per token
    # row 1: s = e^{−0.1} = 0.905 → A<0: max(0.905, 0.95) = 0.95; seq-mean-token-mean ⇒ −0.05
    assert loss.item() == pytest.approx((-1.05 + 0.95) / 2)
    assert metrics["actor/pg_clipfrac"].item() == pytest.approx(1.0)
    assert metrics["actor/pg_clipfrac_lower"].item() == 0.0

    log_prob.grad = None
    loss, _ = compute_policy_loss("gspo", **batch, clip_ratio=0.5)
    loss.backward()
    # unclipped: loss = ½[mean_t(−s₀) + mean_t(s₁)], ∂s_{i,t}/∂logπ_{i,t} = s_i (token-wise)
    s0, s1 = math.exp(0.1), math.exp(-0.1)
    expected = torch.tensor([[-s0 / 4, -s0 / 4], [s1 / 4, s1 / 4]], dtype=torch.float64)
    torch.testing.assert_close(log_prob.grad, expected)


def test_gpg_is_plain_policy_gradient():
    batch = dict(
        old_log_prob=torch.zeros(1, 3),
        log_prob=torch.tensor([[-0.5, -2.0, NAN]]),
        advantages=torch.tensor([[2.0, -1.0, 5.0]]),
        response_mask=torch.tensor([[1, 1, 0]]),
    )
    loss, metrics = compute_policy_loss("gpg", **batch)
    # −A·logπ = [1, −2] ⇒ token-mean −0.5
    assert loss.item() == pytest.approx(-0.5)
    assert metrics["actor/pg_clipfrac"].item() == 0.0


@settings(max_examples=80, deadline=None)
@given(
    data=st.data(),
    rows=st.integers(1, 4),
    width=st.integers(1, 5),
    mode=st.sampled_from(LOSS_AGG_MODES),
    low=st.floats(0.01, 0.99),
    high=st.floats(0.01, 5.0),
    c=st.floats(1.01, 10.0),
)
def test_clip_is_inactive_when_the_ratio_is_one(data, rows, width, mode, low, high, c):
    floats = st.floats(-10, 10, allow_nan=False)
    shape = (rows, width)
    advantages = torch.tensor(
        data.draw(st.lists(floats, min_size=rows * width, max_size=rows * width))
    )
    old = torch.tensor(data.draw(st.lists(floats, min_size=rows * width, max_size=rows * width)))
    mask = torch.tensor(
        data.draw(st.lists(st.integers(0, 1), min_size=rows * width, max_size=rows * width))
    )
    advantages, old, mask = advantages.reshape(shape), old.reshape(shape), mask.reshape(shape)
    loss, metrics = compute_policy_loss(
        "vanilla",
        old_log_prob=old,
        log_prob=old.clone(),
        advantages=advantages,
        response_mask=mask,
        loss_agg_mode=mode,
        clip_ratio_low=low,
        clip_ratio_high=high,
        clip_ratio_c=c,
    )
    torch.testing.assert_close(loss, agg_loss(-advantages, mask, mode))
    assert metrics["actor/pg_clipfrac"].item() == 0.0
    assert metrics["actor/pg_clipfrac_lower"].item() == 0.0
    assert metrics["actor/ppo_kl"].item() == 0.0


def test_value_loss_by_hand():
    vpreds = torch.tensor([[1.0, 2.0, 0.0, NAN]], dtype=torch.float64)
    values = torch.tensor([[0.5, 2.1, 0.0, NAN]], dtype=torch.float64)
    returns = torch.tensor([[2.0, 1.0, 0.3, NAN]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0]])
    loss, metrics = value_loss(
        vpreds=vpreds, values=values, returns=returns, response_mask=mask, cliprange_value=0.2
    )
    # t0: v̂ = clip(1, 0.3, 0.7) = 0.7: max((1−2)², (0.7−2)²) = 1.69 (clipped is larger)
    # t1: v̂ = clip(2, 1.9, 2.3) = 2: max(1, 1) = 1 (tie: not counted as clipped)
    # t2: v̂ = 0: (0 − 0.3)² = 0.09
    assert loss.item() == pytest.approx(0.5 * (1.69 + 1.0 + 0.09) / 3)
    assert metrics["critic/vf_loss"].item() == pytest.approx(0.5 * 2.78 / 3)
    assert metrics["critic/vf_clipfrac"].item() == pytest.approx(1 / 3)
    assert metrics["critic/vpred_mean"].item() == pytest.approx(1.0)


LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, NAN], [7.0, 7.0, 7.0]])
MASK = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", (1 + 2 + 4) / 3),
        # per-row sums 3 and 4; the all-padding row does not count as a sequence
        ("seq-mean-token-sum", (3 + 4) / 2),
        # per-row means 1.5 and 4
        ("seq-mean-token-mean", (1.5 + 4) / 2),
        # mean over non-empty rows of the token sums, / L = 3 (verl 0.9.1, after its PR #6157)
        ("seq-mean-token-sum-norm", (3 + 4) / 2 / 3),
        ("token-sum", 1 + 2 + 4),
    ],
)
def test_agg_loss_modes_by_hand(mode, expected):
    assert agg_loss(LOSS, MASK, mode).item() == pytest.approx(expected)


def test_seq_mean_token_sum_norm_divides_by_the_scale_factor_when_given():
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", loss_scale_factor=7.0).item() == 0.5


def test_agg_loss_of_an_empty_mask_is_zero_and_unknown_modes_are_named():
    for mode in LOSS_AGG_MODES:
        assert agg_loss(LOSS, torch.zeros_like(MASK), mode).item() == 0.0
    with pytest.raises(ValueError, match=r"unknown loss_agg_mode 'token_mean'.*token-mean"):
        agg_loss(LOSS, MASK, "token_mean")


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    rows=st.integers(1, 4),
    width=st.integers(1, 5),
    extra=st.integers(1, 3),
    mode=st.sampled_from(LOSS_AGG_MODES),
)
def test_right_padding_never_changes_the_aggregate(data, rows, width, extra, mode):
    values = torch.randn(
        rows, width, generator=torch.Generator().manual_seed(data.draw(st.integers(0, 999)))
    )
    lengths = data.draw(st.lists(st.integers(0, width), min_size=rows, max_size=rows))
    mask = torch.tensor([[int(t < n) for t in range(width)] for n in lengths])
    padded_values = torch.cat([values, torch.full((rows, extra), NAN)], dim=-1)
    padded_mask = torch.cat([mask, torch.zeros(rows, extra, dtype=mask.dtype)], dim=-1)
    # seq-mean-token-sum-norm divides by the padded length unless told the constant (as verl).
    factor = 16.0 if mode == "seq-mean-token-sum-norm" else None
    torch.testing.assert_close(
        agg_loss(padded_values, padded_mask, mode, loss_scale_factor=factor),
        agg_loss(values, mask, mode, loss_scale_factor=factor),
    )
