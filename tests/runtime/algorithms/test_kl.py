"""Token-level KL estimators, the KL loss term, and in-reward KL with its controllers."""

import math

import pytest
import torch

from kuberl_runtime.algorithms import (
    AdaptiveKLController,
    FixedKLController,
    apply_kl_penalty,
    build_kl_controller,
    kl_loss,
    kl_penalty,
    kl_type_names,
)

# Δ = logπ − logπ_ref = [−1 − (−1.5), −2 − (−1)] = [0.5, −1.0]
LOGPROB = torch.tensor([-1.0, -2.0], dtype=torch.float64)
REF = torch.tensor([-1.5, -1.0], dtype=torch.float64)


@pytest.mark.parametrize(
    ("kl_type", "expected"),
    [
        ("kl", [0.5, -1.0]),
        ("k1", [0.5, -1.0]),
        ("abs", [0.5, 1.0]),
        ("mse", [0.5 * 0.5**2, 0.5 * 1.0**2]),
        ("k2", [0.125, 0.5]),
        # x = −Δ = [−0.5, 1]: eˣ − x − 1
        ("low_var_kl", [math.exp(-0.5) + 0.5 - 1, math.exp(1.0) - 1 - 1]),
        ("k3", [math.exp(-0.5) - 0.5, math.e - 2]),
    ],
)
def test_token_estimators_by_hand(kl_type, expected):
    result = kl_penalty(LOGPROB, REF, kl_type=kl_type)
    torch.testing.assert_close(result, torch.tensor(expected, dtype=torch.float64))


def test_k3_clamps_value_and_keeps_gradients_finite_far_from_the_reference():
    delta = torch.tensor([-1000.0, 1000.0, -25.0], requires_grad=True)
    value = kl_penalty(delta, torch.zeros(3), kl_type="k3")
    # x = 1000 → clamped to 20: e²⁰ − 21 ≫ 10; x = −1000 → −20: e⁻²⁰ + 19 > 10 ⇒ both hit 10
    torch.testing.assert_close(value, torch.tensor([10.0, 10.0, 10.0]))
    value.sum().backward()
    # Without the inner ±20 clamp, e¹⁰⁰⁰ = inf and the clamped-away gradient becomes 0·inf = NaN.
    assert torch.isfinite(delta.grad).all()


def test_straight_through_variant_has_k3_value_and_k2_gradient():
    logprob = LOGPROB.clone().requires_grad_(True)
    value = kl_penalty(logprob, REF, kl_type="k3+")
    torch.testing.assert_close(value, kl_penalty(LOGPROB, REF, kl_type="k3"))
    value.sum().backward()
    # ∂(½Δ²)/∂logπ = Δ
    torch.testing.assert_close(logprob.grad, torch.tensor([0.5, -1.0], dtype=torch.float64))


def test_full_needs_logits_and_unknown_types_are_named():
    with pytest.raises(ValueError, match="needs the policy and reference logits"):
        kl_penalty(LOGPROB, REF, kl_type="full")
    with pytest.raises(ValueError, match=r"unknown kl type 'k4'.*low_var_kl.*full"):
        kl_penalty(LOGPROB, REF, kl_type="k4")
    assert set(kl_type_names()) == {"kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"}


def test_full_through_kl_penalty_uses_the_logits():
    logits = torch.tensor([[[0.0, 0.0]]], dtype=torch.float64)
    ref_logits = torch.tensor([[[0.0, math.log(3.0)]]], dtype=torch.float64)
    # p = [½, ½], q = [¼, ¾]: ½·ln(½/¼) + ½·ln(½/¾) = ½·ln(4/3)
    value = kl_penalty(LOGPROB[:1], REF[:1], kl_type="full", logits=logits, ref_logits=ref_logits)
    torch.testing.assert_close(value, torch.tensor([[0.5 * math.log(4 / 3)]], dtype=torch.float64))


def test_kl_loss_aggregates_the_estimator_over_valid_tokens():
    logprob = torch.tensor([[-1.0, -2.0, -5.0]])
    ref = torch.tensor([[-1.5, -1.0, 0.0]])
    mask = torch.tensor([[1, 1, 0]])
    loss, metrics = kl_loss(logprob=logprob, ref_logprob=ref, response_mask=mask, kl_loss_type="k2")
    # k2 = [0.125, 0.5], token-mean over 2 tokens
    assert loss.item() == pytest.approx((0.125 + 0.5) / 2)
    assert metrics["actor/kl_loss"].item() == pytest.approx(0.3125)


def test_fixed_controller_never_moves():
    ctrl = FixedKLController(kl_coef=0.05)
    ctrl.update(current_kl=3.0, n_steps=1000)
    assert ctrl.value == 0.05


def test_adaptive_controller_follows_ziegler_with_clipped_error():
    ctrl = AdaptiveKLController(init_kl_coef=0.1, target_kl=0.1, horizon=100)
    ctrl.update(current_kl=0.15, n_steps=10)
    # e = 0.15/0.1 − 1 = 0.5 → clipped to 0.2: β = 0.1·(1 + 0.2·10/100) = 0.102
    assert ctrl.value == pytest.approx(0.102)
    ctrl.update(current_kl=0.09, n_steps=10)
    # e = −0.1: β = 0.102·(1 − 0.1·10/100) = 0.10098
    assert ctrl.value == pytest.approx(0.10098)


def test_build_kl_controller_and_its_errors():
    assert isinstance(build_kl_controller("fixed", kl_coef=0.1), FixedKLController)
    adaptive = build_kl_controller("adaptive", kl_coef=0.2, target_kl=0.5, horizon=7)
    assert (adaptive.value, adaptive.target, adaptive.horizon) == (0.2, 0.5, 7)
    with pytest.raises(ValueError, match="horizon must be > 0"):
        build_kl_controller("adaptive", kl_coef=0.1, horizon=0)
    with pytest.raises(ValueError, match="known: adaptive, fixed"):
        build_kl_controller("pid", kl_coef=0.1)


def penalty_batch():
    scores = torch.tensor([[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    old = torch.tensor([[-1.0, -1.0, -1.0], [-2.0, -2.0, -9.0]])
    ref = torch.tensor([[-1.5, -1.0, -0.5], [-2.0, -1.0, -3.0]])
    return scores, mask, old, ref


def test_apply_kl_penalty_subtracts_beta_times_kl_and_reports_verl_metrics():
    scores, mask, old, ref = penalty_batch()
    ctrl = FixedKLController(kl_coef=0.1)
    rewards, metrics = apply_kl_penalty(
        token_level_scores=scores,
        response_mask=mask,
        old_log_probs=old,
        ref_log_prob=ref,
        kl_ctrl=ctrl,
        kl_penalty_type="kl",
    )
    # kld = old − ref = [[0.5, 0, −0.5], [0, −1, (pad)]]; rewards = scores − 0.1·kld
    torch.testing.assert_close(rewards, torch.tensor([[-0.05, 0.0, 1.05], [0.0, 2.1, 0.0]]))
    # row token-means: 0/3 = 0 and −1/2 = −0.5 ⇒ mean over rows −0.25
    assert metrics["actor/reward_kl_penalty"] == pytest.approx(-0.25)
    assert metrics["actor/reward_kl_penalty_coeff"] == 0.1


def test_apply_kl_penalty_reports_the_beta_it_used_then_updates_the_controller():
    scores, mask, old, ref = penalty_batch()
    ctrl = AdaptiveKLController(init_kl_coef=0.1, target_kl=1.0, horizon=4)
    _, metrics = apply_kl_penalty(
        token_level_scores=scores,
        response_mask=mask,
        old_log_probs=old,
        ref_log_prob=ref,
        kl_ctrl=ctrl,
        kl_penalty_type="abs",
    )
    # abs kld rows: (0.5 + 0 + 0.5)/3 = 1/3 and (0 + 1)/2 = 0.5 ⇒ current_kl = 5/12
    assert metrics["actor/reward_kl_penalty"] == pytest.approx(5 / 12)
    assert metrics["actor/reward_kl_penalty_coeff"] == 0.1
    # e = 5/12 − 1 → clipped to −0.2; n_steps = 2 rows: β = 0.1·(1 − 0.2·2/4) = 0.09
    assert ctrl.value == pytest.approx(0.09)
