"""Hold the keys a user set against their fates: refused values are errors, the rest is noted.

Runs on the user's tree after interpolation and before defaults are filled, so "set" means
written by the user (or by an interpolation they wrote). Validation turns each ``RefusedValue``
into a problem with the full path (``validation/validate.py``). A no-effect key is listed as not
honoured only when its value, as written, differs from verl 0.9.1's default (``verl_defaults``):
a config copied from verl's own sets a hundred such keys without asking for anything.
"""

from dataclasses import dataclass, field
from typing import Any

from kuberl_api.keys.entry import ENVELOPE, Fate, KeyEntry
from kuberl_api.keys.leaves import schema_leaves
from kuberl_api.keys.registry import REGISTRY
from kuberl_api.keys.verl_defaults import verl_defaults

MESSAGE = "not supported by kuberl"
HYDRA_TARGETS = "_target_ (Hydra class names)"
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
    at_verl_default: list[str] = field(default_factory=list)
    """No-effect keys set to verl's own default: nothing asked for, so not listed one by one."""


def check_key_fates(resolved: dict[str, Any], written: dict[str, Any]) -> KeyReport:
    """``resolved``: the backend_config after interpolation; ``written``: as the user wrote it
    (interpolations and Hydra ``_target_`` keys in place), to compare with verl's defaults."""
    report = check_fates(resolved, REGISTRY, schema_leaves())
    defaults = verl_defaults()
    set_keys, report.not_honoured = report.not_honoured, []
    for key in set_keys:
        default, value = defaults.values.get(key, _ABSENT), _lookup(written, key)
        alike = REGISTRY[key].as_default
        at_default = _matches(value, default) or _is_allowed(value, alike)
        (report.at_verl_default if at_default else report.not_honoured).append(key)
    targets = _targets(written)
    if targets:
        same = all(defaults.targets.get(path) == name for path, name in targets.items())
        (report.at_verl_default if same else report.not_honoured).append(HYDRA_TARGETS)
    return report


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


def _matches(written: Any, default: Any) -> bool:
    """Every value written is verl's default; a subtree may leave some of verl's keys out."""
    if isinstance(written, dict) and isinstance(default, dict):
        return all(k in default and _matches(v, default[k]) for k, v in written.items())
    return default is not _ABSENT and _same(written, default)


def _targets(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted path -> value of every ``_target_`` key in ``tree``."""
    found: dict[str, Any] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key == "_target_":
                found[prefix + key] = value
            else:
                found.update(_targets(value, f"{prefix}{key}."))
    return found


def _lookup(tree: dict[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node
