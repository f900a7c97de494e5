"""Rules between algorithm, critic, reference, rollout sampling and resume settings."""

from kuberl_api.backend_config import BackendConfig
from kuberl_api.validation.problems import Problem, Severity, join_path

GROUP_ESTIMATORS = {"grpo", "rloo", "opo", "grpo_passk", "gpg", "reinforce_plus_plus_baseline"}


def check_algorithm(cfg: BackendConfig, bc: str) -> list[Problem]:
    return (
        _check_estimator(cfg, bc)
        + _check_actor_and_rollout(cfg, bc)
        + _check_policy_loss(cfg, bc)
        + _check_resume(cfg, bc)
    )


def _check_estimator(cfg: BackendConfig, bc: str) -> list[Problem]:
    estimator, n = cfg.algorithm.adv_estimator, cfg.actor_rollout_ref.rollout.n
    problems = []
    critic_enabled = cfg.critic.enable
    if estimator == "gae" and not critic_enabled:
        problems.append(
            Problem(
                join_path(bc, "critic", "enable"),
                "adv_estimator gae needs a critic",
                "set critic.enable: true or choose grpo",
                False,
            )
        )
    if critic_enabled and estimator != "gae":
        problems.append(
            Problem(
                join_path(bc, "critic", "enable"),
                f"a critic is trained but {estimator} does not use its values",
                "remove critic.enable to save the compute",
                severity=Severity.WARNING,
            )
        )
    if estimator in GROUP_ESTIMATORS and n < 2:
        severity = Severity.ERROR if estimator == "grpo_passk" else Severity.WARNING
        problems.append(
            Problem(
                join_path(bc, "actor_rollout_ref", "rollout", "n"),
                f"{estimator} compares responses within a group, but each "
                "prompt gets one response, so every advantage is 0",
                "set rollout.n to 2 or more (e.g. 5)",
                n,
                severity,
            )
        )
    return problems


def _check_actor_and_rollout(cfg: BackendConfig, bc: str) -> list[Problem]:
    arr = cfg.actor_rollout_ref
    problems = []
    if not arr.hybrid_engine:
        problems.append(
            Problem(
                join_path(bc, "actor_rollout_ref", "hybrid_engine"),
                "only the colocated hybrid engine is supported",
                "remove hybrid_engine or set it to true",
                False,
            )
        )
    # Each sampling switch against its own temperature: training rollouts and validation.
    for where, sampling in (
        (("rollout",), arr.rollout),
        (("rollout", "val_kwargs"), arr.rollout.val_kwargs),
    ):
        if sampling.do_sample and sampling.temperature <= 0:
            problems.append(
                Problem(
                    join_path(bc, "actor_rollout_ref", *where, "temperature"),
                    "sampling needs a positive temperature (0 would decode greedily)",
                    f"set {'.'.join(where)}.temperature > 0 or {'.'.join(where)}.do_sample: false",
                    sampling.temperature,
                )
            )
    if cfg.algorithm.use_kl_in_reward and arr.actor.use_kl_loss:
        problems.append(
            Problem(
                join_path(bc, "algorithm", "use_kl_in_reward"),
                "KL is both subtracted from rewards and added to the actor loss",
                "usually only one is wanted (GRPO: use_kl_loss)",
                True,
                Severity.WARNING,
            )
        )
    return problems


def _check_resume(cfg: BackendConfig, bc: str) -> list[Problem]:
    trainer = cfg.trainer
    path = join_path(bc, "trainer", "resume_from_path")
    if trainer.resume_mode != "resume_path":
        return []
    if not trainer.resume_from_path:
        return [
            Problem(
                path,
                "required when resume_mode is resume_path",
                "set it to a checkpoint directory .../global_step_N, or use resume_mode: auto",
            )
        ]
    if "global_step_" not in trainer.resume_from_path:
        return [
            Problem(
                path,
                "must point at a global_step_N checkpoint directory",
                "e.g. <af_output_dir>/checkpoints/global_step_100",
                trainer.resume_from_path,
            )
        ]
    return []


def _check_policy_loss(cfg: BackendConfig, bc: str) -> list[Problem]:
    """The parameter a loss mode cannot run without (verl 0.9.1 asserts each at the first step)."""
    loss = cfg.actor_rollout_ref.actor.policy_loss
    # mode: (key, its value, whether the mode can run with it, the fix)
    checks = {
        "dro": ("dro_beta", loss.dro_beta, (loss.dro_beta or 0) > 0, "set it > 0, e.g. 0.1"),
        "clip_cov": (
            "clip_cov_ratio",
            loss.clip_cov_ratio,
            loss.clip_cov_ratio > 0,
            "set it > 0 (verl's default: 0.0002)",
        ),
        "kl_cov": (
            "kl_cov_ratio",
            loss.kl_cov_ratio,
            0 < loss.kl_cov_ratio <= 1,
            "set it in (0, 1] (verl's default: 0.0002)",
        ),
    }
    if loss.loss_mode not in checks:
        return []
    key, value, ok, fix = checks[loss.loss_mode]
    if ok:
        return []
    path = join_path(bc, "actor_rollout_ref", "actor", "policy_loss", key)
    return [Problem(path, f"loss_mode {loss.loss_mode} cannot run with this {key}", fix, value)]
