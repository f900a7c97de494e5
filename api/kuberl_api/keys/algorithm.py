"""Fates of ``algorithm.*``."""

from kuberl_api.keys.entry import honoured, no_effect, refused
from kuberl_api.keys.where import DYNAMIC_SAMPLING, LOOP, ROLLOUT_CORRECTION

P = "algorithm."
NO_PF_PPO = "PF-PPO is not implemented; remove it"
ROLL_RLVR = "runtime/kuberl_runtime/algorithms/roll_rlvr.py"

KEYS = [
    honoured(P + "gamma", LOOP),
    honoured(P + "lam", LOOP),
    honoured(P + "adv_estimator", LOOP),
    honoured(P + "norm_adv_by_std_in_grpo", LOOP),
    honoured(P + "use_kl_in_reward", LOOP),
    honoured(P + "kl_penalty", LOOP),
    *[honoured(P + "kl_ctrl." + k, LOOP) for k in ("type", "kl_coef", "horizon", "target_kl")],
    # kuberl extension: ROLL's RLVR options (H-numbers), applied by the loop through this module.
    *[
        honoured(P + k, ROLL_RLVR)
        for k in (
            "reward_clip",
            "advantage_clip",
            "norm_mean_type",
            "norm_std_type",
            "max_len_mask",
            "difficulty_mask",
            "difficulty_low_threshold",
            "difficulty_high_threshold",
        )
    ],
    # DAPO dynamic sampling (verl 0.9 docs/algo/dapo.md), validation/rules_filter_groups.py.
    *[
        honoured(P + "filter_groups." + k, DYNAMIC_SAMPLING)
        for k in ("enable", "metric", "max_num_gen_batches")
    ],
    no_effect(
        P + "filter_groups.max_inflight_gen_batches",
        "bounds verl's V1 asynchronous generation; kuberl generates one batch at a time",
    ),
    # verl 0.9.1's rollout correction (backend_config/rollout_correction.py).
    *[
        honoured(P + "rollout_correction." + k, ROLLOUT_CORRECTION)
        for k in (
            "rollout_is",
            "rollout_is_threshold",
            "rollout_is_batch_normalize",
            "rollout_rs",
            "rollout_rs_threshold",
            "bypass_mode",
            "loss_type",
        )
    ],
    refused(P + "use_pf_ppo", NO_PF_PPO),
    refused(P + "pf_ppo.reweight_method", NO_PF_PPO),
    refused(P + "pf_ppo.weight_pow", NO_PF_PPO),
]
