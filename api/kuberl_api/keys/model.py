"""Fates of ``actor_rollout_ref.model.*`` and the two keys beside it."""

from kuberl_api.keys.actor import FUSED
from kuberl_api.keys.entry import honoured, no_effect, refused
from kuberl_api.keys.where import (
    ACTOR_ENGINE,
    COMPONENTS,
    INHERIT,
    LAUNCH_WORKER,
    MODEL_BUILDER,
    TOKENIZER,
)

M = "actor_rollout_ref.model."

KEYS = [
    refused(
        "actor_rollout_ref.hybrid_engine",
        "kuberl colocates actor, rollout and reference; remove it or set true",
    ),
    honoured("actor_rollout_ref.nccl_timeout", LAUNCH_WORKER),
    honoured(M + "path", COMPONENTS),
    refused(M + "hf_config_path", "kuberl reads the config from model.path; remove it"),
    honoured(M + "tokenizer_path", INHERIT),
    honoured(M + "custom_chat_template", TOKENIZER),
    honoured(M + "external_lib", COMPONENTS),
    refused(M + "external_libs", "use external_lib (one module) instead"),
    honoured(M + "override_config", COMPONENTS),
    honoured(M + "enable_gradient_checkpointing", COMPONENTS),
    honoured(M + "enable_activation_offload", ACTOR_ENGINE),
    honoured(M + "use_remove_padding", INHERIT),
    no_effect(M + "use_fused_kernels", FUSED),
    refused(M + "use_liger", "Liger kernels are not supported; remove it"),
    honoured(M + "lora_rank", COMPONENTS),
    honoured(M + "lora_alpha", COMPONENTS),
    honoured(M + "target_modules", COMPONENTS),
    honoured(M + "exclude_modules", COMPONENTS),
    honoured(M + "lora_adapter_path", MODEL_BUILDER),
    honoured(M + "trust_remote_code", COMPONENTS),
]
