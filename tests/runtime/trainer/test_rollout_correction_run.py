"""GRPO on CPU with verl's rollout correction (`algorithm.rollout_correction`), `kuberl train`.

The HF rollout samples from the trainer's own fp32 weights, so its log-probs (computed from the
decode loop's logits, with a KV cache) and the trainer's (one full forward) differ only by
rounding: the mismatch metrics sit at zero, the IS weights at one, no token is rejected. That
makes both modes checkable end to end: decoupled mode logs verl's metrics from the batch and
trains like the plain run; bypass mode (π_old = the rollout's log-probs) skips the old-log-prob
pass and, with the PPO clip, trains like the recomputing run too.
"""

from __future__ import annotations

import pytest
import torch

from .conftest import base_config, deterministic, read_metrics, read_weights, run_train, set_key

pytestmark = pytest.mark.runtime

RC = "algorithm.rollout_correction."
# Rounding between the decode loop and the full forward (fp32, tiny model).
MISMATCH = 1e-5


def _run(tiny_model_dir, tmp_path, name: str, settings: dict) -> dict[int, dict[str, float]]:
    out = tmp_path / name
    config = base_config(tiny_model_dir, out)
    for key, value in settings.items():
        set_key(config, key, value)
    result = run_train(config, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    return read_metrics(out)


def test_decoupled_correction_logs_the_mismatch_and_trains_like_the_plain_run(
    tiny_model_dir, tmp_path
):
    metrics = _run(
        tiny_model_dir,
        tmp_path,
        "decoupled",
        {
            RC + "rollout_is": "token",
            RC + "rollout_is_threshold": 2.0,
            RC + "rollout_rs": "token_k1,seq_max_k2",
            RC + "rollout_rs_threshold": "0.5_2.0,0.1",
        },
    )
    _run(tiny_model_dir, tmp_path, "plain", {})
    for step, m in metrics.items():
        assert abs(m["rollout_corr/kl"]) < MISMATCH, step
        assert abs(m["rollout_corr/log_ppl_abs_diff"]) < MISMATCH
        assert m["rollout_corr/rollout_is_mean"] == pytest.approx(1.0, abs=MISMATCH)
        assert m["rollout_corr/rollout_is_eff_sample_size"] == pytest.approx(1.0, abs=MISMATCH)
        assert m["rollout_corr/rollout_rs_masked_fraction"] == 0.0
        assert m["training/rollout_probs_diff_valid"] == 1
        assert m["training/rollout_probs_diff_max"] < MISMATCH
        assert m["training/rollout_actor_probs_pearson_corr"] == pytest.approx(1.0, abs=1e-6)
        assert "timing_s/old_log_prob" in m
    plain = read_metrics(tmp_path / "plain")
    assert set(plain[1]) < set(metrics[1])  # the plain run's metrics, and the correction's
    _same_common_metrics_and_weights(tmp_path / "plain", tmp_path / "decoupled")


def test_bypass_mode_skips_the_old_log_prob_pass_and_trains_like_the_recompute(
    tiny_model_dir, tmp_path
):
    # One mini-batch per step: every micro-batch's π_θ is the rollout's policy (with two, the
    # second would see the first one's optimizer step: verl logs that drift too).
    one_mini_batch = {"actor_rollout_ref.actor.ppo_mini_batch_size": 4}
    bypass = _run(tiny_model_dir, tmp_path, "bypass", {**one_mini_batch, RC + "bypass_mode": True})
    _run(tiny_model_dir, tmp_path, "recompute", one_mini_batch)
    for step, m in bypass.items():
        assert "timing_s/old_log_prob" not in m, step
        assert abs(m["rollout_corr/kl"]) < MISMATCH  # from the update's own log-probs
        assert "rollout_corr/rollout_is_mean" not in m  # no IS weights asked for
    # actor/entropy comes from the old-log-prob pass, which bypass mode does not run.
    recompute = tmp_path / "recompute"
    for step, m in read_metrics(recompute).items():
        assert "actor/entropy" in m and "actor/entropy" not in bypass[step]
    _same_common_metrics_and_weights(recompute, tmp_path / "bypass")


def test_bypass_reinforce_with_sequence_weights_runs(tiny_model_dir, tmp_path):
    metrics = _run(
        tiny_model_dir,
        tmp_path,
        "reinforce",
        {
            "actor_rollout_ref.actor.ppo_mini_batch_size": 4,  # one: π_θ = π_rollout throughout
            RC + "bypass_mode": True,
            RC + "loss_type": "reinforce",
            RC + "rollout_is": "sequence",
            RC + "rollout_is_batch_normalize": True,
        },
    )
    assert sorted(metrics) == [1, 2, 3]
    for m in metrics.values():
        # self-normalised: the mean weight is 1 after normalisation, its factor near 1 here
        assert m["rollout_corr/rollout_is_batch_norm_factor"] == pytest.approx(1.0, abs=1e-4)
        assert m["actor/pg_clipfrac"] == 0.0  # REINFORCE: no clip


def _same_common_metrics_and_weights(reference, other) -> None:
    """Every metric both runs log within rel 1e-4, exported weights within atol 1e-5."""
    ref, oth = read_metrics(reference), read_metrics(other)
    assert sorted(ref) == sorted(oth)
    for step in ref:
        a, b = deterministic(ref[step]), deterministic(oth[step])
        for key in a.keys() & b.keys():
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), (step, key)
    w1, w2 = read_weights(reference / "huggingface"), read_weights(other / "huggingface")
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], atol=1e-5, rtol=1e-4)
