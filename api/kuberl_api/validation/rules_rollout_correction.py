"""Rollout correction (``algorithm.rollout_correction``) against the rest of the job.

The thresholds themselves are checked by the schema (backend_config/rollout_correction.py).
"""

from kuberl_api.backend_config import BackendConfig
from kuberl_api.validation.problems import Problem, Severity, join_path

RC = ("algorithm", "rollout_correction")


def corrects(cfg: BackendConfig) -> bool:
    """Any correction on: IS weights, rejection or bypass mode."""
    rc = cfg.algorithm.rollout_correction
    return rc.rollout_is is not None or rc.rollout_rs is not None or rc.bypass_mode


def check_rollout_correction(cfg: BackendConfig, bc: str) -> list[Problem]:
    problems: list[Problem] = []
    actor = cfg.actor_rollout_ref.actor
    if (corrects(cfg) or cfg.actor_rollout_ref.rollout.calculate_log_probs) and (
        actor.on_policy_shortcut
    ):
        problems.append(
            Problem(
                join_path(bc, "actor_rollout_ref", "actor", "on_policy_shortcut"),
                "the shortcut skips the old-log-prob pass that rollout correction compares "
                "with the rollout's log-probs",
                "set on_policy_shortcut to false (bypass_mode: true also skips that pass)",
                True,
            )
        )
    rc = cfg.algorithm.rollout_correction
    if rc.bypass_mode and actor.policy_loss.loss_mode != "vanilla":
        problems.append(
            Problem(
                join_path(bc, "actor_rollout_ref", "actor", "policy_loss", "loss_mode"),
                "bypass mode replaces the loss with its own (rollout_correction.loss_type: "
                f"{rc.loss_type}), as verl 0.9.1 does; this loss mode is not used",
                "remove loss_mode, or set bypass_mode: false to train with it",
                actor.policy_loss.loss_mode,
                Severity.WARNING,
            )
        )
    return problems
