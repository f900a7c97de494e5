"""The resolver's decisions for rollout correction (``algorithm.rollout_correction.*`` and
``rollout.calculate_log_probs``): whether the rollout returns its log-probs, the parsed IS and
rejection bounds, and bypass mode. The runtime (trainer/rollout_correction.py) reads only this."""

from typing import Literal

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.rollout_correction import is_bounds, rs_bounds
from kuberl_api.plan.sections import Frozen


class RejectionPlan(Frozen):
    option: str
    """One of verl's rollout_rs options (token_k1 ... seq_max_k3)."""
    lower: float
    """k1 options: the ratio's lower bound; 0.0 for k2/k3 (upper bound only)."""
    upper: float


class RolloutCorrectionPlan(Frozen):
    calculate_log_probs: bool
    """The rollout returns each sampled token's log-prob (`rollout_log_probs`):
    rollout.calculate_log_probs, or any correction below (they need them). With them, decoupled
    mode logs the rollout/trainer mismatch (rollout_corr/*, training/rollout_probs_diff_*)."""
    rollout_is: Literal["", "token", "sequence"]
    """"": no IS weights."""
    rollout_is_threshold_upper: float
    rollout_is_threshold_lower: float
    """0.0: weights truncated at the upper bound (TIS); > 0: zeroed outside [lower, upper]."""
    rollout_is_batch_normalize: bool
    rollout_rs: list[RejectionPlan]
    """Every option must pass; empty: no rejection."""
    bypass_mode: bool
    """π_old is the rollout's log-probs (no old-log-prob pass); the loss is `loss_type`."""
    loss_type: Literal["ppo_clip", "reinforce"]


def rollout_correction_section(cfg: BackendConfig) -> RolloutCorrectionPlan:
    rc = cfg.algorithm.rollout_correction
    upper, lower = is_bounds(rc.rollout_is_threshold) if rc.rollout_is else (0.0, 0.0)
    rejection = (
        [
            RejectionPlan(option=o, lower=lo, upper=up)
            for o, lo, up in rs_bounds(rc.rollout_rs, rc.rollout_rs_threshold)
        ]
        if rc.rollout_rs is not None
        else []
    )
    corrects = rc.rollout_is is not None or bool(rejection) or rc.bypass_mode
    return RolloutCorrectionPlan(
        calculate_log_probs=cfg.actor_rollout_ref.rollout.calculate_log_probs or corrects,
        rollout_is=rc.rollout_is or "",
        rollout_is_threshold_upper=upper,
        rollout_is_threshold_lower=lower,
        rollout_is_batch_normalize=rc.rollout_is_batch_normalize,
        rollout_rs=rejection,
        bypass_mode=rc.bypass_mode,
        loss_type=rc.loss_type,
    )
