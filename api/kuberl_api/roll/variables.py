"""Top-level Hydra variables: keys a ROLL file defines only to reference them as ``${key}``.

ROLL's own examples write e.g. ``lora_rank: 32`` at the top and ``lora_rank: ${lora_rank}``
inside the workers; ROLL reads the config into its dataclasses ignoring such extra keys. kuberl
resolves the references first, then takes these keys out, so only keys nobody references stay
unknown-key errors.
"""

import re
from typing import Any

from kuberl_api.roll.models import RollConfig

_REFERENCE = re.compile(r"\$\{\s*([A-Za-z_][A-Za-z0-9_]*)")


def referenced_names(node: Any) -> set[str]:
    """The first segment of every ``${name...}`` reference in ``node``'s string leaves."""
    if isinstance(node, dict):
        return set().union(*(referenced_names(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(referenced_names(v) for v in node))
    return set(_REFERENCE.findall(node)) if isinstance(node, str) else set()


def drop_variables(resolved: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """``resolved`` without the top-level keys that are no ROLL key and that ``before`` (the
    same tree, unresolved) references somewhere."""
    names = referenced_names(before) - set(RollConfig.model_fields)
    return {key: value for key, value in resolved.items() if key not in names}
