"""OmegaConf-style ``${...}`` references inside a backend_config, resolved as verl's YAML does.

``${data.max_response_length}`` is absolute from the backend_config root; ``${.save_contents}``
is relative to the node holding the key, each further dot climbs one level. A value that is
exactly one reference keeps the referenced type; references embedded in text become text.
"""

import re
from typing import Any

from kuberl_api.validation.problems import Problem, join_path

_REFERENCE = re.compile(r"\$\{([^${}]+)\}")
_MAX_DEPTH = 32


class _Unresolvable(Exception):
    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


def resolve_interpolations(root: dict, prefix: str) -> tuple[dict, list[Problem]]:
    problems: list[Problem] = []

    def walk(node: Any, where: tuple) -> Any:
        if isinstance(node, dict):
            return {k: walk(v, (*where, k)) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, (*where, i)) for i, v in enumerate(node)]
        if isinstance(node, str) and "${" in node:
            try:
                return _resolve_text(root, node, where[:-1], depth=0)
            except _Unresolvable as err:
                problems.append(Problem(join_path(prefix, *where), err.message, err.hint, node))
        return node

    return walk(root, ()), problems


def _resolve_text(root: dict, text: str, parent: tuple, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise _Unresolvable("interpolation loops back on itself", "break the ${...} cycle")
    whole = _REFERENCE.fullmatch(text)
    if whole:
        return _lookup(root, whole.group(1).strip(), parent, depth)
    return _REFERENCE.sub(lambda m: str(_lookup(root, m.group(1).strip(), parent, depth)), text)


def _lookup(root: dict, reference: str, parent: tuple, depth: int) -> Any:
    if ":" in reference:
        raise _Unresolvable(
            f"resolver '{reference.split(':')[0]}' is not supported",
            "only plain ${key.path} references are resolved; write the value itself",
        )
    if reference.startswith("."):
        levels = len(reference) - len(reference.lstrip("."))
        base = parent[: len(parent) - (levels - 1)] if levels > 1 else parent
        keys = (*base, *reference.lstrip(".").split("."))
    else:
        keys = tuple(reference.split("."))
    node: Any = root
    for i, key in enumerate(keys):
        if not isinstance(node, dict) or key not in node:
            raise _Unresolvable(
                f"${{{reference}}} points at a key that is not set",
                f"set {'.'.join(str(k) for k in keys[: i + 1])} or write the value directly",
            )
        node = node[key]
    if isinstance(node, str) and "${" in node:
        return _resolve_text(root, node, keys[:-1], depth + 1)
    return node
