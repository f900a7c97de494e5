"""Hold the keys a user set against their fates: refused values are errors, the rest is noted.

Runs on the user's tree after interpolation and before defaults are filled, so "set" means
written by the user (or by an interpolation they wrote). Validation turns each ``RefusedValue``
into a problem with the full path (``validation/validate.py``).
"""

from dataclasses import dataclass, field
from typing import Any

from kuberl_api.keys.entry import ENVELOPE, Fate, KeyEntry
from kuberl_api.keys.leaves import schema_leaves
from kuberl_api.keys.registry import REGISTRY

MESSAGE = "not supported by kuberl"
_ABSENT = object()


@dataclass(frozen=True)
class RefusedValue:
    key: str
    value: Any
    fix: str


@dataclass
class KeyReport:
    refused: list[RefusedValue] = field(default_factory=list)
    not_honoured: list[str] = field(default_factory=list)
    """Keys the user set that kuberl accepts without effect (fate no-effect)."""


def check_key_fates(raw_backend: dict[str, Any]) -> KeyReport:
    return check_fates(raw_backend, REGISTRY, schema_leaves())


def check_fates(
    raw_backend: dict[str, Any], registry: dict[str, KeyEntry], defaults: dict[str, Any]
) -> KeyReport:
    """``raw_backend`` against one registry (RL's, or SFT's in ``keys/sft.py``)."""
    report = KeyReport()
    for key, entry in registry.items():
        if key.startswith(ENVELOPE):
            continue
        value = _lookup(raw_backend, key)
        if value is _ABSENT:
            continue
        if entry.fate is Fate.HONOURED:
            if entry.accepts and not _accepted(value, entry.accepts):
                report.refused.append(RefusedValue(key, value, entry.fix))
        elif entry.fate is Fate.REFUSED:
            # At verl's default a refused key asks for what kuberl does anyway.
            allowed = _allowed(entry, defaults.get(key))
            if entry.same_as:
                allowed += (_lookup(raw_backend, entry.same_as),)
            if not _is_allowed(value, allowed):
                report.refused.append(RefusedValue(key, value, entry.fix))
        else:
            report.not_honoured.append(key)
    return report


def _allowed(entry: KeyEntry, schema_default: Any) -> tuple[Any, ...]:
    if entry.has_schema_default:
        return (schema_default, None)
    return tuple(entry.allowed)


def _is_allowed(value: Any, allowed: tuple[Any, ...]) -> bool:
    return any(_same(value, option) for option in allowed)


def _same(value: Any, option: Any) -> bool:
    if isinstance(value, list) and isinstance(option, list):
        return sorted(map(str, value)) == sorted(map(str, option))
    if isinstance(value, bool) or isinstance(option, bool):
        return value is option
    return bool(value == option)


def _accepted(value: Any, accepts: tuple[Any, ...]) -> bool:
    items = value if isinstance(value, list) else [value]
    return all(any(_same(item, option) for option in accepts) for item in items)


def _lookup(tree: dict[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node
