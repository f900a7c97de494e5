"""Fates of ``algorithm.*``."""

from kuberl_api.keys.entry import honoured, refused
from kuberl_api.keys.where import LOOP

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
    refused(P + "use_pf_ppo", NO_PF_PPO),
    refused(P + "pf_ppo.reweight_method", NO_PF_PPO),
    refused(P + "pf_ppo.weight_pow", NO_PF_PPO),
]
