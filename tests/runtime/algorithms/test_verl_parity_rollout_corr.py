"""Rollout correction against verl 0.9.1's own `rollout_corr_helper` on random batches (masks
with gaps, a row without tokens): IS weights (token/sequence, TIS/IcePop, batch-normalised),
rejection masks (every option, chained), every `rollout_corr/*` metric, and bypass mode's loss
(ppo_clip and reinforce) with its gradient."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from verl.trainer.config import RolloutCorrectionConfig
from verl.trainer.ppo import rollout_corr_helper as verl_rc
from verl.workers.config import PolicyLossConfig

from kuberl_api.backend_config.rollout_correction import REJECTION_OPTIONS, is_bounds, rs_bounds
from kuberl_runtime.algorithms import GlobalBatch
from kuberl_runtime.algorithms.rollout_correction import ISSpec, RSSpec, rollout_correction
from kuberl_runtime.algorithms.rollout_correction_loss import bypass_policy_loss
from tests.runtime.algorithms.verl_oracle import TOL, actor_config, core_algos, random_batch

SEEDS = st.integers(0, 2**31 - 1)
SHAPES = st.tuples(st.integers(3, 10), st.integers(2, 9))
FAST = settings(max_examples=20, deadline=None)
# (rollout_is, threshold, batch_normalize): TIS and IcePop at both levels.
IS_CASES = [
    (None, 2.0, False),
    ("token", 2.0, False),
    ("token", "0.5_1.5", False),
    ("token", 1.2, True),
    ("sequence", 2.0, False),
    ("sequence", 3.0, True),
    ("sequence", "0.2_5.0", False),
]
RS_CASES = [
    (None, None),
    *[(o, "0.7_1.3" if o.endswith("k1") else 0.05) for o in REJECTION_OPTIONS],
    ("token_k1,seq_max_k2", "0.6_1.6,2.5"),
    ("seq_mean_k1,token_k3,seq_sum_k2", 1.5),
]


def _specs(rollout_is, is_threshold, normalize, rollout_rs, rs_threshold):
    importance = None
    if rollout_is is not None:
        upper, lower = is_bounds(is_threshold)
        importance = ISSpec(rollout_is, upper, lower, normalize)
    rejection = ()
    if rollout_rs is not None:
        rejection = tuple(RSSpec(o, u, lo) for o, lo, u in rs_bounds(rollout_rs, rs_threshold))
    return importance, rejection


def _inputs(seed, shape):
    b = random_batch(seed, *shape)
    # The trainer's log-probs near the rollout's, with a few tokens far off (rejected, clamped).
    g = torch.Generator().manual_seed(seed)
    spikes = (torch.rand(b.log_prob.shape, generator=g) < 0.1) * 3.0
    return b, b.log_prob + spikes.to(b.log_prob.dtype), b.old_log_prob


def _assert_metrics(ours: dict[str, float], theirs: dict[str, float]) -> None:
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(ours[key]), key
        else:
            assert ours[key] == pytest.approx(value, rel=TOL, abs=TOL), key


@pytest.mark.parametrize(("rollout_is", "is_threshold", "normalize"), IS_CASES)
@pytest.mark.parametrize(("rollout_rs", "rs_threshold"), RS_CASES)
@FAST
@given(seed=SEEDS, shape=SHAPES)
def test_weights_mask_and_metrics_equal_verl(
    rollout_is, is_threshold, normalize, rollout_rs, rs_threshold, seed, shape
):
    b, train, rollout = _inputs(seed, shape)
    importance, rejection = _specs(rollout_is, is_threshold, normalize, rollout_rs, rs_threshold)
    ours = rollout_correction(train, rollout, b.mask, importance, rejection)
    try:
        proto, mask, metrics = verl_rc.compute_rollout_correction_and_rejection_mask(
            old_log_prob=train,
            rollout_log_prob=rollout,
            response_mask=b.mask,
            rollout_is=rollout_is,
            rollout_is_threshold=is_threshold,
            rollout_is_batch_normalize=normalize,
            rollout_rs=rollout_rs,
            rollout_rs_threshold=rs_threshold,
        )
    except ZeroDivisionError:  # IcePop zeroed every weight: verl's ESS divides by zero
        assert ours.metrics["rollout_corr/rollout_is_eff_sample_size"] == 0.0
        assert not ours.weights.any()
        return
    torch.testing.assert_close(ours.response_mask, mask, atol=0, rtol=0)
    if proto is None:
        assert ours.weights is None
    else:
        torch.testing.assert_close(
            ours.weights, proto.batch["rollout_is_weights"], atol=TOL, rtol=TOL
        )
    _assert_metrics(ours.metrics, metrics)


@pytest.mark.parametrize("loss_type", ["ppo_clip", "reinforce"])
@pytest.mark.parametrize(
    ("rollout_is", "rollout_rs", "rs_threshold"),
    [(None, None, None), ("sequence", "token_k1,seq_max_k2", "0.6_1.6,2.5"), ("token", None, None)],
)
@pytest.mark.parametrize("loss_agg_mode", ["token-mean", "seq-mean-token-sum"])
@FAST
@given(seed=SEEDS, shape=SHAPES)
def test_bypass_loss_and_gradient_equal_verl(
    loss_type, rollout_is, rollout_rs, rs_threshold, loss_agg_mode, seed, shape
):
    b, train, rollout = _inputs(seed, shape)
    importance, rejection = _specs(rollout_is, 2.0, False, rollout_rs, rs_threshold)
    batch = GlobalBatch(dp_size=1, batch_num_tokens=float(b.mask.sum()), global_batch_size=b.rows)
    ours_lp = train.clone().requires_grad_(True)
    loss, metrics = bypass_policy_loss(
        loss_type=loss_type,
        log_prob=ours_lp,
        rollout_log_prob=rollout,
        advantages=b.advantages,
        response_mask=b.mask,
        importance=importance,
        rejection=rejection,
        loss_agg_mode=loss_agg_mode,
        global_batch=batch,
    )
    loss.backward()
    correction = RolloutCorrectionConfig(
        rollout_is=rollout_is,
        rollout_is_threshold=2.0,
        rollout_rs=rollout_rs,
        rollout_rs_threshold=rs_threshold,
        loss_type=loss_type,
        bypass_mode=True,
    )
    config = actor_config(
        policy_loss=PolicyLossConfig(loss_mode="bypass_mode", rollout_correction=correction)
    )
    config.global_batch_info.update(
        dp_size=1,
        batch_num_tokens=batch.batch_num_tokens,
        global_batch_size=batch.global_batch_size,
    )
    theirs_lp = train.clone().requires_grad_(True)
    theirs, their_metrics = core_algos.compute_policy_loss_bypass_mode(
        old_log_prob=rollout,
        log_prob=theirs_lp,
        advantages=b.advantages,
        response_mask=b.mask,
        loss_agg_mode=loss_agg_mode,
        config=config,
    )
    theirs.backward()
    torch.testing.assert_close(loss, theirs, atol=TOL, rtol=TOL)
    torch.testing.assert_close(ours_lp.grad, theirs_lp.grad, atol=TOL, rtol=TOL)
    for key, value in their_metrics.items():
        assert float(metrics[key]) == pytest.approx(float(value), rel=TOL, abs=TOL), key
