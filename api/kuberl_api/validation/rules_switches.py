"""verl 0.9.1 subtrees kuberl accepts while they are switched off, and Hydra's ``_target_``.

verl's generated config carries whole feature subtrees (multi-turn, MTP, QAT, distillation,
transfer queue, ...) each with an on/off switch. kuberl accepts them at verl's default, which is
off, and refuses switching one on with the path, the value and what to do. ``_target_`` keys
(Hydra's class names, at every level of verl's files) mean nothing to kuberl: they are removed
before the schema sees the tree and reported once as "accepted, no effect".
"""

from typing import Any

from kuberl_api.validation.documents import ABSENT, lookup_dotted, same_value
from kuberl_api.validation.problems import Problem, join_path

HYDRA_TARGET = "_target_"

_AR = "actor_rollout_ref."
_NOT_YET = "not supported by kuberl"

# (subtree, switch inside it, values that keep it off, what to do instead)
SWITCHES: list[tuple[str, str, tuple[Any, ...], str]] = [
    (_AR + "rollout.mtp", "enable", (False, None), "multi-token prediction: " + _NOT_YET),
    (_AR + "model.mtp", "enable", (False, None), "multi-token prediction: " + _NOT_YET),
    ("critic.model.mtp", "enable", (False, None), "multi-token prediction: " + _NOT_YET),
    (_AR + "rollout.qat", "enable", (False, None), "quantisation-aware training: " + _NOT_YET),
    (_AR + "actor.qat", "enable", (False, None), "quantisation-aware training: " + _NOT_YET),
    (_AR + "actor.fsdp_config.qat", "enable", (False, None), "QAT: " + _NOT_YET),
    (_AR + "ref.fsdp_config.qat", "enable", (False, None), "QAT: " + _NOT_YET),
    ("critic.model.fsdp_config.qat", "enable", (False, None), "QAT: " + _NOT_YET),
    ("reward_model.model.fsdp_config.qat", "enable", (False, None), "QAT: " + _NOT_YET),
    (_AR + "model.tiled_mlp", "enabled", (False, None), "tiled MLP: " + _NOT_YET),
    ("critic.model.tiled_mlp", "enabled", (False, None), "tiled MLP: " + _NOT_YET),
    (_AR + "model.lora", "rank", (0, None), "use actor_rollout_ref.model.lora_rank instead"),
    ("critic.model.lora", "rank", (0, None), "use critic.model.lora_rank instead"),
    (_AR + "rollout.disaggregation", "enabled", (False, None), "PD disaggregation: " + _NOT_YET),
    (_AR + "rollout.prometheus", "enable", (False, None), "use kuberl's /metrics (docs)"),
    (_AR + "rollout.checkpoint_engine", "backend", ("naive", None), "weights sync: " + _NOT_YET),
    ("sandbox_fusion", "url", (None,), "sandbox execution rewards: " + _NOT_YET),
    ("distillation", "enabled", (False, None), "on-policy distillation: " + _NOT_YET),
    ("transfer_queue", "enable", (False, None), "the transfer queue: " + _NOT_YET),
    ("skip", "rollout.enable", (False, None), "replaying dumped rollouts: " + _NOT_YET),
    ("skip", "rollout_tq.enable", (False, None), "replaying dumped rollouts: " + _NOT_YET),
    ("skip", "async_rollout.enable", (False, None), "replaying dumped rollouts: " + _NOT_YET),
    ("trainer.v1", "trainer_mode", ("sync", None), "asynchronous trainer modes: " + _NOT_YET),
]
SWITCHED_SUBTREES = {subtree for subtree, *_ in SWITCHES}


def strip_hydra_targets(tree: dict) -> tuple[dict, bool]:
    """A copy of ``tree`` without ``_target_`` keys, and whether there was one."""
    found = False

    def walk(node: Any) -> Any:
        nonlocal found
        if isinstance(node, dict):
            found |= HYDRA_TARGET in node
            return {k: walk(v) for k, v in node.items() if k != HYDRA_TARGET}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(tree), found


def check_switches(tree: dict, bc: str) -> list[Problem]:
    """A problem for every verl feature subtree switched on (kuberl does not implement them)."""
    problems = []
    for subtree, switch, off, fix in SWITCHES:
        node = lookup_dotted(tree, subtree)
        if not isinstance(node, dict):
            continue
        value = lookup_dotted(node, switch)
        if value is ABSENT or any(same_value(value, option) for option in off):
            continue
        keep = " or ".join("null" if v is None else repr(v) for v in off)
        problems.append(
            Problem(
                join_path(bc, *subtree.split("."), *switch.split(".")),
                _NOT_YET,
                f"{fix}; remove it or set {keep}",
                value,
            )
        )
    return problems
