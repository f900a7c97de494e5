"""Deprecated verl keys: accepted with a warning naming the replacement.

Checked on the keys the user wrote (the raw tree), since defaults fill replacements later.
"""

from typing import Any

from kuberl_api.validation.problems import Problem, Severity, join_path

# (path of the node, deprecated key, replacement)
DEPRECATED_KEYS: list[tuple[str, str, str]] = [
    ("data", "val_batch_size", "nothing: the whole validation set is one batch"),
    ("actor_rollout_ref.actor", "ppo_micro_batch_size", "ppo_micro_batch_size_per_gpu"),
    ("actor_rollout_ref.actor.optim", "warmup_style", "lr_scheduler_type"),
    ("actor_rollout_ref.actor.fsdp_config", "grad_offload", "param_offload"),
    ("actor_rollout_ref.ref", "log_prob_micro_batch_size", "log_prob_micro_batch_size_per_gpu"),
    (
        "actor_rollout_ref.rollout",
        "log_prob_micro_batch_size",
        "log_prob_micro_batch_size_per_gpu",
    ),
    ("critic", "ppo_micro_batch_size", "ppo_micro_batch_size_per_gpu"),
    ("critic", "forward_micro_batch_size", "forward_micro_batch_size_per_gpu"),
    ("critic.optim", "warmup_style", "lr_scheduler_type"),
    ("reward_model", "micro_batch_size", "micro_batch_size_per_gpu"),
    ("trainer", "remove_previous_ckpt_in_save", "max_actor_ckpt_to_keep: 1"),
]


def check_deprecated_keys(raw_backend: dict, bc: str) -> list[Problem]:
    problems = []
    for node_path, key, replacement in DEPRECATED_KEYS:
        node = _lookup(raw_backend, node_path)
        if not isinstance(node, dict) or key not in node:
            continue
        path = join_path(bc, *node_path.split("."), key)
        if replacement in node:
            problems.append(
                Problem(
                    path,
                    f"both {key} and {replacement} are set",
                    f"remove {key} (deprecated) and keep {replacement}",
                )
            )
        else:
            problems.append(
                Problem(
                    path, "deprecated key", f"use {replacement} instead", severity=Severity.WARNING
                )
            )
    return problems


def _lookup(tree: dict, dotted: str) -> Any:
    node: Any = tree
    for key in dotted.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node
