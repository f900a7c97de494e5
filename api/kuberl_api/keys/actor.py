"""Fates of ``actor_rollout_ref.actor.*`` and ``actor_rollout_ref.ref.*``."""

from kuberl_api.keys.entry import honoured, no_effect, refused
from kuberl_api.keys.fsdp import checkpoint_keys, frozen_fsdp_keys, optim_keys, trained_fsdp_keys
from kuberl_api.keys.where import ACTOR_ENGINE, COMPONENTS, DEPRECATED, LOOP, PLAN

A = "actor_rollout_ref.actor."
R = "actor_rollout_ref.ref."
SP = A + "ulysses_sequence_parallel_size"
SAME_SP = (
    "the reference runs in the actor's (dp, sp) layout: leave it at 1 or set it to "
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size"
)
FSDP2_ONLY = "kuberl runs FSDP2 for both fsdp and fsdp2"
FUSED = (
    "kuberl's one log-prob and entropy path never builds full-vocabulary fp32 logits: only "
    "response positions reach the LM head, and log-softmax and entropy run in fp32 row chunks, "
    "recomputed in backward (engine/logprob.py)"
)
ENTROPY_RECOMPUTED = (
    "kuberl's entropy keeps only its input logits and one float per row for backward and "
    "recomputes each chunk's softmax there (algorithms/entropy.py)"
)
ENGINE_KEYS = [
    "ppo_mini_batch_size",
    "ppo_micro_batch_size_per_gpu",
    "use_dynamic_bsz",
    "ppo_max_token_len_per_gpu",
    "grad_clip",
    "clip_ratio",
    "clip_ratio_low",
    "clip_ratio_high",
    "clip_ratio_c",
    "policy_loss.loss_mode",
    "policy_loss.clip_cov_ratio",
    "policy_loss.clip_cov_lb",
    "policy_loss.clip_cov_ub",
    "policy_loss.kl_cov_ratio",
    "policy_loss.ppo_kl_coef",
    "policy_loss.dro_beta",
    "tau_pos",
    "tau_neg",
    "loss_agg_mode",
    "loss_scale_factor",
    "entropy_coeff",
    "calculate_entropy",
    "use_kl_loss",
    "kl_loss_coef",
    "kl_loss_type",
    "ppo_epochs",
]

ACTOR_KEYS = [
    no_effect(A + "strategy", FSDP2_ONLY, as_default=("fsdp", "fsdp2")),
    honoured(A + "ppo_micro_batch_size", DEPRECATED),
    *[honoured(A + k, ACTOR_ENGINE) for k in ENGINE_KEYS],
    no_effect(A + "shuffle", "verl's FSDP actor ignores it too (new engine only)"),
    no_effect(A + "data_loader_seed", "verl's FSDP actor ignores it too (new engine only)"),
    honoured(SP, PLAN),
    no_effect(A + "use_torch_compile", "a speed-up of the entropy helper; same numbers"),
    no_effect(A + "entropy_from_logits_with_chunking", "kuberl always computes entropy in chunks"),
    no_effect(A + "entropy_checkpointing", ENTROPY_RECOMPUTED),
    honoured(A + "use_remove_padding", COMPONENTS),
    honoured(A + "on_policy_shortcut", LOOP),  # kuberl extension (issue 15)
    no_effect(A + "use_fused_kernels", FUSED),
    *optim_keys(A),
    *trained_fsdp_keys(A),
    *checkpoint_keys(A),
]

REF_KEYS = [
    no_effect(R + "strategy", FSDP2_ONLY, as_default=("fsdp", "fsdp2")),
    *frozen_fsdp_keys(R, sharded=True),
    honoured(R + "log_prob_micro_batch_size", DEPRECATED),
    honoured(R + "log_prob_micro_batch_size_per_gpu", LOOP),
    honoured(R + "log_prob_use_dynamic_bsz", LOOP),
    honoured(R + "log_prob_max_token_len_per_gpu", LOOP),
    refused(R + "ulysses_sequence_parallel_size", SAME_SP, allowed=(1, None), same_as=SP),
    no_effect(R + "use_torch_compile", "a speed-up of the entropy helper; same numbers"),
    no_effect(R + "entropy_from_logits_with_chunking", "kuberl always computes entropy in chunks"),
    no_effect(R + "entropy_checkpointing", "the reference runs no backward pass"),
]

KEYS = ACTOR_KEYS + REF_KEYS
