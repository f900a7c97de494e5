"""Fates of ``reward_model.*`` and ``custom_reward_function.*``."""

from kuberl_api.keys.entry import honoured, no_effect, refused
from kuberl_api.keys.fsdp import frozen_fsdp_keys
from kuberl_api.keys.where import COMPONENTS, DAPO, DEPRECATED, REWARD_MANAGER, REWARD_MODEL

R = "reward_model."
NO_RM_BATCHING = "the reward model scores micro batches of micro_batch_size_per_gpu; remove it"

KEYS = [
    honoured(R + "enable", COMPONENTS),
    no_effect(
        R + "strategy",
        "kuberl runs FSDP2 for both fsdp and fsdp2",
        as_default=("fsdp", "fsdp2"),
    ),
    honoured(R + "model.path", COMPONENTS),
    honoured(R + "model.input_tokenizer", REWARD_MODEL),
    refused(R + "model.external_lib", "custom reward model classes are not supported; remove it"),
    honoured(R + "model.trust_remote_code", COMPONENTS),
    no_effect(R + "model.use_remove_padding", "packing is a speed-up; scores are the same"),
    *frozen_fsdp_keys(R + "model.", sharded=True),
    honoured(R + "micro_batch_size", DEPRECATED),
    honoured(R + "micro_batch_size_per_gpu", COMPONENTS),
    refused(R + "max_length", "reward model truncation is not supported; remove it"),
    refused(R + "use_dynamic_bsz", NO_RM_BATCHING),
    refused(R + "forward_max_token_len_per_gpu", NO_RM_BATCHING),
    honoured(
        R + "reward_manager",
        REWARD_MANAGER,
        accepts=(None, "naive", "batch", "dapo", "prime", "gdpo"),
        fix="kuberl implements the naive, batch, dapo, prime and gdpo reward managers; use one",
    ),
    *[
        honoured(R + "reward_kwargs." + key, DAPO)
        for key in (
            "overlong_buffer_cfg.enable",
            "overlong_buffer_cfg.len",
            "overlong_buffer_cfg.penalty_factor",
            "overlong_buffer_cfg.log",
            "max_resp_len",
        )
    ],
    no_effect(R + "launch_reward_fn_async", "rewards are scored in step; the result is the same"),
    honoured("custom_reward_function.path", REWARD_MANAGER),
    honoured("custom_reward_function.name", REWARD_MANAGER),
    honoured("custom_reward_function.reward_kwargs", REWARD_MANAGER),
]
