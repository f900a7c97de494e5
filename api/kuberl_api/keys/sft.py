"""Fates of every key of verl 0.9.1's SFT config (``backend_config/sft.py``).

``model``, ``engine``, ``optim`` and ``checkpoint`` are the RL tree's own nodes (the actor's
model, ``fsdp_config``, ``optim`` and ``checkpoint``): a key kuberl refuses or ignores there is
refused or ignored here for the same reason, and a key RL honours is honoured here through the
SFT plan, which reads it with the same functions. The rest (``data``, ``trainer``) is SFT's own.
``tests/api/test_sft_keys.py`` fails when a leaf of the SFT schema has no fate here.
"""

from typing import Any

from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.keys.check import KeyReport, check_fates
from kuberl_api.keys.entry import Fate, KeyEntry, honoured, no_effect, refused
from kuberl_api.keys.leaves import walk_leaves
from kuberl_api.keys.registry import REGISTRY
from kuberl_api.keys.trainer import LOGGERS
from kuberl_api.keys.where import PLAN_COMMON

SFT_PLAN = "api/kuberl_api/plan/sft.py"
SFT_COMPONENTS = "runtime/kuberl_runtime/sft/components.py"
"""Builds the (dp, sp) mesh and the Ulysses attention from the plan's placement."""

# SFT node -> the RL node it is (same model class, same meaning)
SHARED_NODES = {
    "model.": "actor_rollout_ref.model.",
    "engine.": "actor_rollout_ref.actor.fsdp_config.",
    "optim.": "actor_rollout_ref.actor.optim.",
    "checkpoint.": "actor_rollout_ref.actor.checkpoint.",
}
# Shared keys RL honours and the SFT plan reads: where it reads them.
_SHARED_HONOURED = {
    "model.": SFT_PLAN,
    "engine.": PLAN_COMMON,  # fsdp_section, shared with RL
    "optim.": PLAN_COMMON,  # optim_section, shared with RL
    "checkpoint.": PLAN_COMMON,  # checkpoint_section, shared with RL
}
_SHARED_EXCEPTIONS = [
    honoured("model.use_remove_padding", SFT_PLAN),
    # The RL tree's fsdp_config copy mirrors the actor's key; in SFT it is the key itself.
    honoured("engine.ulysses_sequence_parallel_size", SFT_COMPONENTS),
    no_effect("engine.grad_offload", "deprecated in verl; FSDP2 offloads grads with params"),
    honoured("optim.clip_grad", SFT_PLAN),
    refused(
        "model.enable_activation_offload",
        "activation offload is honoured for the RL actor's update only; the SFT trainer keeps "
        "activations where autograd puts them: remove it",
    ),
]

D, T = "data.", "trainer."
_OWN = [
    *[
        honoured(D + k, SFT_PLAN)
        for k in (
            "train_batch_size",
            "micro_batch_size_per_gpu",
            "max_token_len_per_gpu",
            "use_dynamic_bsz",
            "train_files",
            "val_files",
            "train_max_samples",
            "val_max_samples",
            "messages_key",
            "max_length",
            "truncation",
            "apply_chat_template_kwargs",
        )
    ],
    no_effect(
        D + "pad_mode", "kuberl packs by model.use_remove_padding; padding never changes the loss"
    ),
    no_effect(D + "num_workers", "conversations are tokenised once, in the trainer process"),
    no_effect(D + "use_shm", "files are read from their mounted path"),
    no_effect(D + "balance_dp_token", "verl 0.9.1 does not implement it either"),
    refused(D + "tools_key", "tool definitions in SFT data are not supported yet; remove it"),
    refused(D + "enable_thinking_key", "per-row thinking switches are not supported; remove it"),
    refused(
        D + "enable_thinking_default",
        "pass enable_thinking in data.apply_chat_template_kwargs instead",
        allowed=("none", None),
    ),
    refused(D + "ignore_input_ids_mismatch", "kuberl renders each turn once; remove it"),
    refused(D + "custom_cls.path", "custom SFT dataset classes are not supported; remove it"),
    refused(D + "custom_cls.name", "custom SFT dataset classes are not supported; remove it"),
    *[
        honoured(T + k, SFT_PLAN)
        for k in (
            "default_local_dir",
            "project_name",
            "experiment_name",
            "total_epochs",
            "total_training_steps",
            "seed",
            "save_freq",
            "test_freq",
            "max_ckpt_to_keep",
            "resume_mode",
            "resume_from_path",
            "device",
            "nnodes",
            "n_gpus_per_node",
        )
    ],
    honoured(
        T + "logger",
        "api/kuberl_api/backend_config/sft.py",  # SFTTrainerConfig.loggers, read by the plan
        accepts=LOGGERS,
        fix=f"kuberl logs to {', '.join(LOGGERS)}; remove the others",
    ),
    honoured(T + "default_hdfs_dir", SFT_PLAN),  # SFTTrainerPlan.checkpoint_mirror
    no_effect(T + "balance_batch", "verl's SFT trainer does not read it"),
    no_effect(T + "profile_interval", "profiling is not supported"),
    no_effect("profiler", "profiling is not supported"),
]


def sft_schema_leaves() -> dict[str, Any]:
    return dict(walk_leaves(SFTConfig))


def _shared(key: str) -> KeyEntry | None:
    for node, rl_node in SHARED_NODES.items():
        if not key.startswith(node):
            continue
        rl = REGISTRY[rl_node + key[len(node) :]]
        if rl.fate is Fate.HONOURED:
            return honoured(key, _SHARED_HONOURED[node], accepts=rl.accepts, fix=rl.fix)
        return KeyEntry(key, rl.fate, fix=rl.fix, reason=rl.reason, allowed=rl.allowed)
    return None


def _build() -> dict[str, KeyEntry]:
    table = {e.key: e for e in [*_SHARED_EXCEPTIONS, *_OWN]}
    for key in sft_schema_leaves():
        if key not in table and (entry := _shared(key)) is not None:
            table[key] = entry
    return table


SFT_REGISTRY: dict[str, KeyEntry] = _build()


def check_sft_key_fates(raw: dict[str, Any]) -> KeyReport:
    return check_fates(raw, SFT_REGISTRY, sft_schema_leaves())
