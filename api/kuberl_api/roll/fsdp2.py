"""ROLL's FSDP2 strategy (``fsdp2_train`` / ``fsdp2_infer``) → verl's ``fsdp_config``.

Meanings from ROLL's ``roll/distributed/strategy/fsdp2_strategy.py``: ``fsdp_size`` <= 1 or >=
the world shards over every rank (a 1-D mesh), otherwise HSDP with shard groups of that size;
``param_dtype``/``reduce_dtype`` are FSDP2's MixedPrecisionPolicy; ``reshard_after_forward`` and
``offload_policy`` (CPUOffloadPolicy) are fully_shard's own arguments. verl's FSDP2 engine takes
the same four under ``fsdp_config`` (fsdp_size -1 for all ranks), so they map one to one.
"""

from typing import Any

from kuberl_api.roll.draft import Draft
from kuberl_api.roll.models import StrategyConfig

_SAME_MATHS = "same result, another memory layout"


def map_fsdp2_config(
    sc: StrategyConfig, draft: Draft, where: tuple, fsdp: str, world: int, trained: bool
) -> set[str]:
    """Set ``fsdp``'s keys from ``sc``; the strategy_config keys used (or named in a warning)."""
    used = {"fsdp_size", "param_dtype", "reduce_dtype", "reshard_after_forward"}
    used |= {"offload_policy", "tiled_num_shards", "use_batched_model_update"}
    _map_fsdp_size(sc.fsdp_size, draft, where, fsdp, world, trained)
    if sc.param_dtype is not None:
        draft.set(f"{fsdp}.mixed_precision.param_dtype", sc.param_dtype, *where, "param_dtype")
    if sc.reduce_dtype is not None and trained:
        # A frozen model reduces no gradients: verl's reduce_dtype has no effect there.
        draft.set(f"{fsdp}.mixed_precision.reduce_dtype", sc.reduce_dtype, *where, "reduce_dtype")
    for key in ("reshard_after_forward", "offload_policy"):
        value = getattr(sc, key)
        if value is not None:
            draft.set(f"{fsdp}.{key}", value, *where, key)
    used |= _warn_layout_options(sc, draft, where)
    return used


def _map_fsdp_size(
    size: int | None, draft: Draft, where: tuple, fsdp: str, world: int, trained: bool
) -> None:
    if size is None:
        return
    hybrid = 1 < size < world
    if trained:
        draft.set(f"{fsdp}.fsdp_size", size if hybrid else -1, *where, "fsdp_size")
    elif hybrid:
        draft.warn(
            (*where, "fsdp_size"),
            f"approximated: kuberl shards a frozen model over all {world} ranks, not in "
            f"groups of {size} ({_SAME_MATHS})",
            "remove it, or set it to the device count",
            size,
        )


def _warn_layout_options(sc: StrategyConfig, draft: Draft, where: tuple) -> set[str]:
    if sc.wrap_policy:
        named = sc.wrap_policy.get("transformer_layer_cls_to_wrap")
        draft.warn(
            (*where, "wrap_policy"),
            "approximated: kuberl makes one FSDP unit per decoder layer plus the root, "
            f"whatever wrap_policy names (transformer_layer_cls_to_wrap: {named}; embeddings, "
            f"lm_head and experts are not units of their own) ({_SAME_MATHS})",
            "remove it to silence this",
            "...",
        )
    _warn_if_on(
        sc.use_batched_model_update,
        draft,
        (*where, "use_batched_model_update"),
        "ignored: kuberl's weight sync always sends the weights bucket by bucket",
    )
    for key in ("apply_expert_patch", "moe_use_grouped_mm"):
        _warn_if_on(
            getattr(sc, key),
            draft,
            (*where, key),
            "ignored: kuberl runs the model's own transformers MoE forward (same result)",
        )
    _warn_if_on(
        sc.apply_tiled_mlp,
        draft,
        (*where, "apply_tiled_mlp"),
        "ignored: kuberl computes the MLP untiled (same result, a larger activation peak on "
        "long sequences)",
    )
    for key in ("ep_size", "efsdp_size"):
        value = getattr(sc, key)
        if value is not None and value > 1:
            draft.warn(
                (*where, key),
                "expert parallelism is approximated: kuberl shards the experts with the rest "
                f"of the model over every FSDP rank ({_SAME_MATHS})",
                f"set {key}: 1 to silence this; size memory for FSDP2",
                value,
            )
    return {"wrap_policy", "apply_expert_patch", "moe_use_grouped_mm", "apply_tiled_mlp"} | {
        "ep_size",
        "efsdp_size",
    }


def _warn_if_on(value: Any, draft: Draft, roll_keys: tuple, message: str) -> None:
    if value:
        draft.warn(roll_keys, message, f"set {roll_keys[-1]}: false to silence this", value)
