"""Aggregation, policy losses, value loss, KL estimators and the adaptive KL controller against
verl 0.9.1's own functions, on random batches (masks with gaps and rows without a valid token)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kuberl_runtime.algorithms import (
    LOSS_AGG_MODES,
    AdaptiveKLController,
    GlobalBatch,
    LossModeParams,
    agg_loss,
    compute_policy_loss,
    kl_loss,
    kl_penalty,
    value_loss,
)
from kuberl_runtime.algorithms import (
    POLICY_LOSSES as KUBERL_POLICY_LOSSES,
)
from tests.runtime.algorithms.verl_oracle import (
    TOL,
    PolicyLossConfig,
    actor_config,
    core_algos,
    random_batch,
)

SEEDS = st.integers(0, 2**31 - 1)
SHAPES = st.tuples(st.integers(3, 12), st.integers(2, 9))
FAST = settings(max_examples=25, deadline=None)
SCALES = st.sampled_from([None, 7.0, 64.0])


def close(ours: torch.Tensor, theirs: torch.Tensor | float) -> None:
    theirs = torch.as_tensor(theirs, dtype=ours.dtype)
    torch.testing.assert_close(ours, theirs, atol=TOL, rtol=TOL)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@FAST
@given(seed=SEEDS, shape=SHAPES, scale=SCALES)
def test_local_aggregation_equals_verl(mode, seed, shape, scale):
    b = random_batch(seed, *shape)
    ours = agg_loss(b.advantages, b.mask, mode, loss_scale_factor=scale)
    theirs = core_algos.agg_loss(b.advantages, b.mask, mode, loss_scale_factor=scale)
    close(ours, theirs)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@FAST
@given(seed=SEEDS, shape=SHAPES, scale=SCALES, dp=st.integers(1, 4))
def test_global_batch_aggregation_equals_verl(mode, seed, shape, scale, dp):
    b = random_batch(seed, *shape)
    tokens, rows = int(b.mask.sum()) * dp + 3, b.rows * dp  # the mini-batch over all ranks
    batch = GlobalBatch(dp_size=dp, batch_num_tokens=tokens, global_batch_size=rows)
    ours = agg_loss(b.advantages, b.mask, mode, loss_scale_factor=scale, global_batch=batch)
    theirs = core_algos.agg_loss(
        b.advantages,
        b.mask,
        mode,
        dp_size=dp,
        batch_num_tokens=tokens,
        global_batch_size=rows,
        loss_scale_factor=scale,
    )
    close(ours, theirs)


def test_seq_mean_token_sum_norm_is_the_mean_over_rows_not_the_sum():
    loss = torch.ones(4, 5, dtype=torch.float64)
    mask = torch.ones(4, 5)
    mask[3] = 0  # three non-empty rows, each summing to 5
    assert agg_loss(loss, mask, "seq-mean-token-sum-norm", loss_scale_factor=10.0).item() == 0.5


def test_global_counts_are_required_across_ranks():
    b = random_batch(0)
    with pytest.raises(ValueError, match="token count"):
        agg_loss(b.advantages, b.mask, "token-mean", global_batch=GlobalBatch(dp_size=2))


POLICY_LOSSES = {
    "vanilla": core_algos.compute_policy_loss_vanilla,
    "gspo": core_algos.compute_policy_loss_gspo,
    "gpg": core_algos.compute_policy_loss_gpg,
}
CLIPS = st.tuples(
    st.floats(0.05, 0.4), st.floats(0.05, 0.4), st.floats(0.05, 0.4), st.floats(1.5, 4.0)
)


@pytest.mark.parametrize("loss_mode", sorted(POLICY_LOSSES))
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@FAST
@given(seed=SEEDS, shape=SHAPES, clips=CLIPS, weights=st.booleans(), glob=st.booleans())
def test_policy_losses_equal_verl(loss_mode, mode, seed, shape, clips, weights, glob):
    b = random_batch(seed, *shape)
    clip, low, high, c = clips
    is_weights = b.values.abs() if weights else None
    batch = GlobalBatch(2, int(b.mask.sum()) * 2, b.rows * 2) if glob else None
    log_prob = b.log_prob.clone().requires_grad_(True)
    ours, metrics = compute_policy_loss(
        loss_mode,
        old_log_prob=b.old_log_prob,
        log_prob=log_prob,
        advantages=b.advantages,
        response_mask=b.mask,
        loss_agg_mode=mode,
        clip_ratio=clip,
        clip_ratio_low=low,
        clip_ratio_high=high,
        clip_ratio_c=c,
        rollout_is_weights=is_weights,
        loss_scale_factor=32.0,
        global_batch=batch,
    )
    config = actor_config(clip_ratio=clip, clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=c)
    config.global_batch_info.update(loss_scale_factor=32.0)
    if batch is not None:
        config.global_batch_info.update(
            dp_size=2,
            batch_num_tokens=batch.batch_num_tokens,
            global_batch_size=batch.global_batch_size,
        )
    verl_log_prob = b.log_prob.clone().requires_grad_(True)
    theirs, their_metrics = POLICY_LOSSES[loss_mode](
        old_log_prob=b.old_log_prob,
        log_prob=verl_log_prob,
        advantages=b.advantages,
        response_mask=b.mask.bool(),
        loss_agg_mode=mode,
        config=config,
        rollout_is_weights=is_weights,
    )
    close(ours, theirs)
    ours.backward()
    theirs.backward()
    torch.testing.assert_close(log_prob.grad, verl_log_prob.grad, atol=TOL, rtol=TOL)
    for key, value in their_metrics.items():
        close(metrics[key], value)


# verl 0.9.1's other modes (algorithms/policy_loss_extra.py); bypass_mode is rollout correction's.
MODE_NAMES = ["clip_cov", "kl_cov", "geo_mean", "cispo", "sapo", "dppo_tv", "dppo_kl", "dro"]
NOT_LOSS_MODES = {"bypass_mode": "algorithm.rollout_correction.bypass_mode selects it"}
MODE_PARAMS = st.builds(
    LossModeParams,
    clip_cov_ratio=st.floats(0.05, 0.5),
    clip_cov_lb=st.floats(-1.0, 0.2),
    clip_cov_ub=st.floats(0.3, 5.0),
    kl_cov_ratio=st.floats(0.05, 1.0),
    ppo_kl_coef=st.floats(0.0, 2.0),
    tau_pos=st.floats(0.5, 3.0),
    tau_neg=st.floats(0.5, 3.0),
    dro_beta=st.floats(0.01, 2.0),
)


def test_every_verl_loss_mode_is_kuberls_or_listed():
    verl_modes = set(core_algos.POLICY_LOSS_REGISTRY)
    assert verl_modes - set(KUBERL_POLICY_LOSSES.names()) == set(NOT_LOSS_MODES)
    assert set(MODE_NAMES) | set(POLICY_LOSSES) == set(KUBERL_POLICY_LOSSES.names())


def _verl_config(clips: tuple[float, ...], params: LossModeParams, batch: GlobalBatch | None):
    clip, low, high, c = clips
    policy_loss = PolicyLossConfig(
        clip_cov_ratio=params.clip_cov_ratio,
        clip_cov_lb=params.clip_cov_lb,
        clip_cov_ub=params.clip_cov_ub,
        kl_cov_ratio=params.kl_cov_ratio,
        ppo_kl_coef=params.ppo_kl_coef,
        dro_beta=params.dro_beta,
    )
    config = actor_config(
        clip_ratio=clip,
        clip_ratio_low=low,
        clip_ratio_high=high,
        clip_ratio_c=c,
        tau_pos=params.tau_pos,
        tau_neg=params.tau_neg,
        policy_loss=policy_loss,
    )
    config.global_batch_info.update(loss_scale_factor=32.0)
    if batch is not None:
        config.global_batch_info.update(
            dp_size=2,
            batch_num_tokens=batch.batch_num_tokens,
            global_batch_size=batch.global_batch_size,
        )
    return config


@pytest.mark.parametrize("loss_mode", MODE_NAMES)
@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@FAST
@given(
    seed=SEEDS,
    shape=SHAPES,
    clips=CLIPS,
    params=MODE_PARAMS,
    weights=st.booleans(),
    glob=st.booleans(),
)
def test_other_loss_modes_equal_verl(loss_mode, mode, seed, shape, clips, params, weights, glob):
    """Loss, gradient and metrics; clip_cov's random pick draws from torch's global generator,
    seeded alike before each side."""
    b = random_batch(seed, *shape)
    is_weights = b.values.abs() + 0.1 if weights else None
    batch = GlobalBatch(2, int(b.mask.sum()) * 2, b.rows * 2) if glob else None
    clip, low, high, c = clips
    log_prob = b.log_prob.clone().requires_grad_(True)
    torch.manual_seed(seed)
    ours, metrics = compute_policy_loss(
        loss_mode,
        old_log_prob=b.old_log_prob,
        log_prob=log_prob,
        advantages=b.advantages,
        response_mask=b.mask,
        loss_agg_mode=mode,
        clip_ratio=clip,
        clip_ratio_low=low,
        clip_ratio_high=high,
        clip_ratio_c=c,
        rollout_is_weights=is_weights,
        loss_scale_factor=32.0,
        global_batch=batch,
        mode_params=params,
    )
    verl_log_prob = b.log_prob.clone().requires_grad_(True)
    torch.manual_seed(seed)
    theirs, their_metrics = core_algos.get_policy_loss_fn(loss_mode)(
        old_log_prob=b.old_log_prob,
        log_prob=verl_log_prob,
        advantages=b.advantages,
        response_mask=b.mask.bool(),
        loss_agg_mode=mode,
        config=_verl_config(clips, params, batch),
        rollout_is_weights=is_weights,
    )
    close(ours, theirs)
    ours.backward()
    theirs.backward()
    torch.testing.assert_close(log_prob.grad, verl_log_prob.grad, atol=TOL, rtol=TOL)
    assert set(metrics) == {"actor/pg_loss", *their_metrics}
    for key, value in their_metrics.items():
        close(metrics[key], value)


def _surrogate_case() -> dict[str, torch.Tensor]:
    """One row of four tokens; (A − mean A)·(log π − mean log π): 2.53, 1.72, 1.74, 2.23."""
    log_prob = torch.tensor([[-0.1, -0.2, -3.0, -2.5]], dtype=torch.float64)
    return {
        "old_log_prob": log_prob.clone(),
        "log_prob": log_prob.requires_grad_(True),
        "advantages": torch.tensor([[2.0, 1.5, -1.0, -2.0]], dtype=torch.float64),
        "response_mask": torch.ones(1, 4),
    }


def test_clip_cov_cuts_the_gradient_of_high_covariance_tokens():
    case = _surrogate_case()
    params = LossModeParams(clip_cov_ratio=0.5, clip_cov_lb=2.0, clip_cov_ub=5.0)
    loss, metrics = compute_policy_loss("clip_cov", **case, mode_params=params)
    loss.backward()
    # ratio 1: each token's gradient is −A/4; the tokens with cov in (2, 5) are cut, both of
    # them: max(1, ⌊0.5 x 4⌋) = 2.
    cut = torch.tensor([[True, False, False, True]])
    expected = torch.where(cut, torch.zeros(()), -case["advantages"] / 4)
    torch.testing.assert_close(case["log_prob"].grad, expected)
    assert metrics["actor/pg_clipfrac"].item() == pytest.approx(0.5)


def test_kl_cov_penalises_the_top_covariance_tokens():
    case = _surrogate_case()
    case["old_log_prob"] = case["old_log_prob"] - 0.3  # |log ratio| 0.3 everywhere
    params = LossModeParams(kl_cov_ratio=0.25, ppo_kl_coef=2.0)
    penalised, _ = compute_policy_loss("kl_cov", **case, mode_params=params)
    plain, _ = compute_policy_loss("kl_cov", **case, mode_params=LossModeParams(ppo_kl_coef=0.0))
    # one token (0.25 x 4) gets + 2.0 x 0.3, averaged over 4 tokens
    assert (penalised - plain).item() == pytest.approx(2.0 * 0.3 / 4)


@pytest.mark.parametrize(("mode", "field"), [("dro", "dro_beta"), ("kl_cov", "kl_cov_ratio")])
def test_a_mode_without_its_parameter_is_refused_by_name(mode, field):
    case = _surrogate_case()
    with pytest.raises(ValueError, match=field):
        compute_policy_loss(mode, **case, mode_params=LossModeParams(**{field: 0.0}))


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@FAST
@given(seed=SEEDS, shape=SHAPES, clip=st.floats(0.05, 1.0), glob=st.booleans())
def test_value_loss_equals_verl(mode, seed, shape, clip, glob):
    b = random_batch(seed, *shape)
    vpreds = b.values + b.advantages * 0.7
    returns = b.values + b.log_prob
    tokens, rows = int(b.mask.sum()) * 2, b.rows * 2
    batch = GlobalBatch(2, tokens, rows) if glob else None
    ours, metrics = value_loss(
        vpreds=vpreds,
        values=b.values,
        returns=returns,
        response_mask=b.mask,
        cliprange_value=clip,
        loss_agg_mode=mode,
        loss_scale_factor=16.0,
        global_batch=batch,
    )
    extra = {"dp_size": 2, "batch_num_tokens": tokens, "global_batch_size": rows} if glob else {}
    theirs, clipfrac = core_algos.compute_value_loss(
        vpreds, returns, b.values, b.mask, clip, mode, loss_scale_factor=16.0, **extra
    )
    close(ours, theirs)
    close(metrics["critic/vf_clipfrac"], clipfrac)


KL_TYPES = ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "k1+", "k3+", "low_var_kl+", "k2+"]


@pytest.mark.parametrize("kl_type", KL_TYPES)
@FAST
@given(seed=SEEDS, shape=SHAPES)
def test_kl_estimators_and_their_gradients_equal_verl(kl_type, seed, shape):
    b = random_batch(seed, *shape)
    ours_in = b.log_prob.clone().requires_grad_(True)
    theirs_in = b.log_prob.clone().requires_grad_(True)
    ours = kl_penalty(ours_in, b.ref_log_prob, kl_type=kl_type)
    theirs = core_algos.kl_penalty(theirs_in, b.ref_log_prob, kl_type)
    torch.testing.assert_close(ours, theirs, atol=TOL, rtol=TOL)
    (ours * b.mask).sum().backward()
    (theirs * b.mask).sum().backward()
    torch.testing.assert_close(ours_in.grad, theirs_in.grad, atol=TOL, rtol=TOL)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
@FAST
@given(seed=SEEDS, shape=SHAPES)
def test_kl_loss_aggregates_like_verls_ppo_loss(mode, seed, shape):
    b = random_batch(seed, *shape)
    ours, _ = kl_loss(
        logprob=b.log_prob,
        ref_logprob=b.ref_log_prob,
        response_mask=b.mask,
        kl_loss_type="low_var_kl",
        loss_agg_mode=mode,
        loss_scale_factor=9.0,
    )
    kld = core_algos.kl_penalty(b.log_prob, b.ref_log_prob, "low_var_kl")
    close(ours, core_algos.agg_loss(kld, b.mask, mode, loss_scale_factor=9.0))


@given(
    kls=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=20),
    target=st.floats(0.01, 1.0),
    horizon=st.integers(1, 20000),
    n_steps=st.integers(1, 512),
)
@settings(max_examples=50, deadline=None)
def test_adaptive_kl_controller_equals_verl(kls, target, horizon, n_steps):
    ours = AdaptiveKLController(0.05, target_kl=target, horizon=horizon)
    theirs = core_algos.AdaptiveKLController(0.05, target_kl=target, horizon=horizon)
    for kl in kls:
        ours.update(kl, n_steps)
        theirs.update(kl, n_steps)
        assert ours.value == pytest.approx(float(theirs.value), rel=1e-12)
