"""Fates of ``critic.*``."""

from kuberl_api.keys.entry import honoured, no_effect, refused
from kuberl_api.keys.fsdp import checkpoint_keys, optim_keys, trained_fsdp_keys
from kuberl_api.keys.where import COMPONENTS, CRITIC_ENGINE, DEPRECATED

C = "critic."
ENGINE_KEYS = [
    "ppo_mini_batch_size",
    "ppo_micro_batch_size_per_gpu",
    "forward_micro_batch_size_per_gpu",
    "use_dynamic_bsz",
    "ppo_max_token_len_per_gpu",
    "forward_max_token_len_per_gpu",
    "ppo_epochs",
    "grad_clip",
    "cliprange_value",
    "loss_agg_mode",
    "loss_scale_factor",
]
MODEL_KEYS = [
    "path",
    "override_config",
    "external_lib",
    "trust_remote_code",
    "enable_gradient_checkpointing",
    "use_remove_padding",
    "lora_rank",
    "lora_alpha",
    "target_modules",
]

KEYS = [
    honoured(C + "enable", COMPONENTS),
    no_effect(
        C + "strategy",
        "kuberl runs FSDP2 for both fsdp and fsdp2",
        as_default=("fsdp", "fsdp2"),
    ),
    *optim_keys(C),
    *[honoured(C + "model." + k, COMPONENTS) for k in MODEL_KEYS],
    no_effect(C + "model.tokenizer_path", "the critic reads the prompts the actor tokenised"),
    *trained_fsdp_keys(C + "model."),
    honoured(C + "ppo_micro_batch_size", DEPRECATED),
    honoured(C + "forward_micro_batch_size", DEPRECATED),
    *[honoured(C + k, CRITIC_ENGINE) for k in ENGINE_KEYS],
    refused(
        C + "ulysses_sequence_parallel_size",
        "the critic runs in the actor's (dp, sp) layout: leave it at 1 or set it to "
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
        allowed=(1, None),
        same_as="actor_rollout_ref.actor.ulysses_sequence_parallel_size",
    ),
    no_effect(C + "shuffle", "verl's FSDP critic ignores it too (new engine only)"),
    *checkpoint_keys(C),
]
