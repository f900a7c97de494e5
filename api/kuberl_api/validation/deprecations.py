"""Deprecated verl keys: accepted with a warning naming the replacement.

Checked on the keys the user wrote (the raw tree), since defaults fill replacements later. A
null is unset; a deprecated key set to the same value as its replacement only warns (verl's
documented ppo_trainer values write ``grad_offload: False`` beside ``param_offload: False``).
"""

import copy
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
    ("critic.model.fsdp_config", "grad_offload", "param_offload"),
    ("reward_model", "micro_batch_size", "micro_batch_size_per_gpu"),
    ("trainer", "remove_previous_ckpt_in_save", "max_actor_ckpt_to_keep: 1"),
]


# The SFT tree's (verl's SFT trainer config: its optim node sits at the top).
SFT_DEPRECATED_KEYS: list[tuple[str, str, str]] = [
    ("optim", "warmup_style", "lr_scheduler_type"),
]

# Deprecated keys that are plain renames, converted on the tree (the micro-batch ones need the
# data-parallel size and are converted by ``kuberl_api.effective``; warmup_style is read where
# the plan decides the schedule, ``plan/common.py``).
RENAMED = {
    (node, key, replacement) for node, key, replacement in DEPRECATED_KEYS if key == "grad_offload"
}


def convert_renamed_keys(tree: dict) -> dict:
    """A copy where each renamed deprecated key set (not null) fills its unset replacement."""
    out = copy.deepcopy(tree)
    for node_path, key, replacement in sorted(RENAMED):
        node = _lookup(out, node_path)
        if isinstance(node, dict) and node.get(key) is not None and node.get(replacement) is None:
            node[replacement] = node[key]
    return out


def check_deprecated_keys(
    raw_backend: dict, bc: str, deprecated: list[tuple[str, str, str]] = DEPRECATED_KEYS
) -> list[Problem]:
    problems = []
    for node_path, key, replacement in deprecated:
        node = _lookup(raw_backend, node_path)
        # null means unset (verl's own defaults write the deprecated keys as null).
        if not isinstance(node, dict) or node.get(key) is None:
            continue
        path = join_path(bc, *node_path.split("."), key)
        if node.get(replacement) is not None and node[replacement] != node[key]:
            problems.append(
                Problem(
                    path,
                    f"both {key} and {replacement} are set, to different values",
                    f"remove {key} (deprecated) and keep {replacement}",
                    node[key],
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
