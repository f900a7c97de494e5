"""ROLL's FSDP2 ``model_args``: ``ulysses_size`` and ``freeze_module_prefix`` → verl keys.

``ulysses_size`` is the Ulysses sequence-parallel group of ROLL's FSDP2 strategy
(``fsdp2_strategy.py``: attention heads all-to-all within groups of that many ranks), which is
verl's ``ulysses_sequence_parallel_size``. ``freeze_module_prefix`` stops gradients to every
parameter whose name starts with a prefix (``model_providers.freeze_model``); kuberl can freeze
a vision-language model's vision tower (``actor.freeze_vision_tower``), nothing else.
"""

from kuberl_api.roll.draft import Draft
from kuberl_api.roll.models import ModelArgs, RollConfig

ARR = "actor_rollout_ref"
VISION_TOWER_NAMES = ("visual", "vision_tower", "vision_model")
"""The module names kuberl's model builder freezes for freeze_vision_tower (Qwen2.5-VL's
``model.visual``); kept equal to runtime's engine/model_builder.VISION_TOWER_NAMES."""


def map_sequence_parallel(cfg: RollConfig, draft: Draft) -> None:
    actor = cfg.actor_train.model_args.ulysses_size or 1
    if actor > 1:
        _set_sp(draft, "actor_train", actor, f"{ARR}.actor", f"{ARR}.model")
    if cfg.critic is not None and (cfg.critic.model_args.ulysses_size or 1) > 1:
        _set_sp(draft, "critic", cfg.critic.model_args.ulysses_size, "critic", "critic.model")
    ref = cfg.reference.model_args.ulysses_size if cfg.reference else None
    if ref is not None and ref != actor:
        draft.warn(
            ("reference", "model_args", "ulysses_size"),
            f"approximated: kuberl computes reference log-probs in actor_train's "
            f"sequence-parallel layout (ulysses_size {actor}; same result)",
            f"set it to {actor} or remove it to silence this",
            ref,
        )
    infer = cfg.actor_infer.model_args.ulysses_size
    if infer not in (None, 1):
        draft.warn(
            ("actor_infer", "model_args", "ulysses_size"),
            "ignored: generation is split by the engine's tensor parallel size",
            "remove it",
            infer,
        )


def _set_sp(draft: Draft, role: str, size: int, sp_node: str, model_node: str) -> None:
    where = (role, "model_args", "ulysses_size")
    cp_key = f"{sp_node}.ulysses_sequence_parallel_size"
    if draft.get(cp_key) not in (None, size):
        draft.error(
            where,
            f"conflicts with context_parallel_size ({draft.get(cp_key)}), which kuberl also "
            "maps to Ulysses sequence parallelism",
            "keep one of them",
            size,
        )
        return
    draft.set(cp_key, size, *where)
    # Ulysses splits packed (unpadded) sequences, as verl requires.
    draft.set(f"{model_node}.use_remove_padding", True, *where)


def map_freeze(cfg: RollConfig, draft: Draft) -> None:
    _map_actor_freeze(cfg.actor_train.model_args, draft)
    for role in ("actor_infer", "reference"):
        worker = getattr(cfg, role)
        if worker is not None and worker.model_args.freeze_module_prefix is not None:
            draft.warn(
                (role, "model_args", "freeze_module_prefix"),
                f"ignored: {role} does not train",
                "set it under actor_train.model_args only",
                worker.model_args.freeze_module_prefix,
            )
    if cfg.critic is not None and cfg.critic.model_args.freeze_module_prefix is not None:
        draft.error(
            ("critic", "model_args", "freeze_module_prefix"),
            "kuberl trains every parameter of the critic",
            "remove it",
            cfg.critic.model_args.freeze_module_prefix,
        )


def _map_actor_freeze(args: ModelArgs, draft: Draft) -> None:
    prefixes = split_prefixes(args.freeze_module_prefix)
    if not prefixes:
        return
    where = ("actor_train", "model_args", "freeze_module_prefix")
    others = [p for p in prefixes if p.rsplit(".", 1)[-1] not in VISION_TOWER_NAMES]
    if others:
        draft.error(
            where,
            f"kuberl can freeze only a vision-language model's vision tower "
            f"({', '.join(VISION_TOWER_NAMES)}); freezing {', '.join(others)} is not supported",
            "keep only the vision tower's prefix (e.g. model.visual), remove it, or train a LoRA "
            "adapter (lora_rank) instead",
            args.freeze_module_prefix,
        )
        return
    draft.set(f"{ARR}.actor.freeze_vision_tower", True, *where)


def split_prefixes(value: str | list[str] | None) -> list[str]:
    """ROLL's ``split_arg``: a comma-separated string or a list, items stripped."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else value
    return [item.strip() for item in items if item.strip()]
