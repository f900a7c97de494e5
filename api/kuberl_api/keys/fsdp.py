"""Fates of the FSDP, optimiser and checkpoint blocks, which sit under several parents."""

from kuberl_api.keys.entry import KeyEntry, honoured, no_effect, refused
from kuberl_api.keys.where import (
    CHECKPOINT,
    COMPONENTS,
    DEPRECATED,
    FSDP,
    OPTIM,
    OPTIM_OFFLOAD,
    PLAN,
    PLAN_COMMON,
)

FSDP1_ONLY = "an FSDP1 knob; kuberl runs FSDP2, where it has no meaning"
NO_WRAP = "kuberl wraps one FSDP unit per decoder layer; remove it or set 0"
HSDP = "a frozen model shards over all ranks; remove it or set -1"
BUFFERS = (
    "FSDP2 keeps buffers in fsdp_config.model_dtype (fp32 by default); set model_dtype "
    "instead, or remove it"
)


def _buffer_dtype(p: str) -> KeyEntry:
    return refused(p + "buffer_dtype", BUFFERS, allowed=("fp32", "float32"))


def trained_fsdp_keys(prefix: str) -> list[KeyEntry]:
    """``fsdp_config`` of a model that is trained (actor, critic)."""
    p = prefix + "fsdp_config."
    return [
        refused(p + "wrap_policy.min_num_params", NO_WRAP),
        honoured(p + "mixed_precision.param_dtype", PLAN_COMMON),
        honoured(p + "mixed_precision.reduce_dtype", FSDP),
        _buffer_dtype(p + "mixed_precision."),
        honoured(p + "param_offload", FSDP),
        # Deprecated: converted to param_offload (FSDP2 offloads grads with params).
        honoured(p + "grad_offload", "api/kuberl_api/validation/deprecations.py"),
        honoured(p + "optimizer_offload", OPTIM_OFFLOAD),
        honoured(p + "offload_policy", FSDP),
        honoured(p + "reshard_after_forward", FSDP),
        honoured(p + "fsdp_size", FSDP),
        honoured(p + "model_dtype", COMPONENTS),
        honoured(p + "dtype", FSDP),
        no_effect(p + "forward_prefetch", FSDP1_ONLY),
        no_effect(p + "use_orig_params", FSDP1_ONLY),
        no_effect(p + "forward_only", "set internally by verl; not a user setting"),
        honoured(p + "seed", COMPONENTS),
    ]


def frozen_fsdp_keys(prefix: str, *, sharded: bool) -> list[KeyEntry]:
    """``fsdp_config`` of a model that is only run forward (reference, reward model)."""
    p = prefix + "fsdp_config."
    not_sharded = "the reward model is not sharded yet; remove it"
    keys = ("param_offload", "offload_policy", "dtype", "reshard_after_forward")
    param_dtype = p + "mixed_precision.param_dtype"
    if sharded:
        shard = [honoured(p + k, FSDP) for k in keys]
        shard.append(honoured(param_dtype, PLAN_COMMON))
    else:
        shard = [refused(p + k, not_sharded) for k in (*keys, "mixed_precision.param_dtype")]
    return [
        *shard,
        no_effect(p + "mixed_precision.reduce_dtype", "a frozen model reduces no gradients"),
        _buffer_dtype(p + "mixed_precision."),
        refused(p + "wrap_policy.min_num_params", NO_WRAP),
        no_effect(p + "grad_offload", "a frozen model has no gradients"),
        no_effect(p + "optimizer_offload", "a frozen model has no optimizer"),
        refused(p + "fsdp_size", HSDP),
        honoured(p + "model_dtype", COMPONENTS),
        no_effect(p + "forward_prefetch", FSDP1_ONLY),
        no_effect(p + "use_orig_params", FSDP1_ONLY),
        no_effect(p + "forward_only", "set internally by verl; not a user setting"),
        no_effect(p + "seed", "a frozen model is loaded, not initialised"),
    ]


def optim_keys(prefix: str) -> list[KeyEntry]:
    p = prefix + "optim."
    keys = [
        "lr",
        "lr_warmup_steps",
        "lr_warmup_steps_ratio",
        "lr_scheduler_type",
        "min_lr_ratio",
        "num_cycles",
        "weight_decay",
        "betas",
    ]
    return [honoured(p + k, OPTIM) for k in keys] + [
        honoured(p + "warmup_style", DEPRECATED),
        no_effect(p + "total_training_steps", "set by the trainer from the run's length"),
        honoured(p + "optimizer", OPTIM),
        # verl 0.9.1's engine clips at optim.clip_grad; the plan prefers it to the role's grad_clip.
        honoured(p + "clip_grad", PLAN),
    ]


def checkpoint_keys(prefix: str) -> list[KeyEntry]:
    p = prefix + "checkpoint."
    return [honoured(p + "save_contents", CHECKPOINT), honoured(p + "load_contents", CHECKPOINT)]
