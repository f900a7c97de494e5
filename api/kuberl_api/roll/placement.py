"""ROLL's ``device_mapping`` and ``num_gpus_per_node`` → kuberl's colocated world.

ROLL places each role on a list of global device ranks; kuberl runs every role on the same
devices (verl's hybrid engine), so the world is actor_train's devices and any other layout is
an approximation the user is told about.
"""

import re

from kuberl_api.roll.draft import Draft
from kuberl_api.roll.models import RollConfig

_RANGE = re.compile(r"^\s*list\(\s*range\(\s*(\d+)\s*,\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)\s*\)\s*$")
_LIST = re.compile(r"^\s*\[\s*(\d+(?:\s*,\s*\d+)*)?\s*,?\s*\]\s*$")
_LIST_CALL = re.compile(r"^\s*list\((.*)\)\s*$")
ROLES = ("actor_train", "actor_infer", "reference", "critic")


def parse_device_mapping(value: list[int] | str) -> list[int] | None:
    """``[0, 1]``, ``"[0, 1]"``, ``"list([0, 1])"`` or ``"list(range(0, 8))"``; None when it is
    none of these."""
    if isinstance(value, list):
        return value
    if (call := _LIST_CALL.match(value)) and _LIST.match(call.group(1)):
        value = call.group(1)
    if match := _RANGE.match(value):
        start, stop, step = match.groups()
        return list(range(int(start), int(stop), int(step or 1)))
    if match := _LIST.match(value):
        return [int(x) for x in (match.group(1) or "").split(",") if x.strip()]
    return None


def map_placement(cfg: RollConfig, draft: Draft) -> int:
    """Set trainer.nnodes/n_gpus_per_node from the mappings; returns the world size (>= 1)."""
    mappings = _mappings(cfg, draft)
    train = mappings.get("actor_train")
    if not train:
        return 1
    if len(set(train)) != len(train):
        draft.error(
            ("actor_train", "device_mapping"),
            "lists a device more than once",
            "list each device rank once",
            cfg.actor_train.device_mapping,
        )
        return 1
    for role, devices in mappings.items():
        if role != "actor_train" and sorted(devices) != sorted(train):
            draft.warn(
                (role, "device_mapping"),
                f"{role} on other devices than actor_train is approximated: kuberl colocates "
                f"every role on actor_train's {len(train)} devices (hybrid engine)",
                "use actor_train's device_mapping for every role to silence this",
                getattr(cfg, role).device_mapping,
            )
    world = len(train)
    per_node = min(cfg.num_gpus_per_node, world)
    if world % per_node:
        draft.error(
            ("actor_train", "device_mapping"),
            f"{world} devices do not fill whole nodes of num_gpus_per_node={per_node}",
            f"use a multiple of {per_node} devices",
            cfg.actor_train.device_mapping,
        )
        return world
    draft.set("trainer.nnodes", world // per_node, "actor_train", "device_mapping")
    draft.set("trainer.n_gpus_per_node", per_node, "actor_train", "device_mapping")
    return world


def _mappings(cfg: RollConfig, draft: Draft) -> dict[str, list[int]]:
    found = {}
    for role in ROLES:
        worker = getattr(cfg, role)
        if worker is None or worker.device_mapping is None:
            continue
        devices = parse_device_mapping(worker.device_mapping)
        if devices is None:
            draft.error(
                (role, "device_mapping"),
                "cannot read this device list",
                "write a list such as [0, 1] or list(range(0, 8))",
                worker.device_mapping,
            )
        elif not devices:
            draft.error((role, "device_mapping"), "is empty", "list at least one device rank")
        else:
            found[role] = devices
    return found
