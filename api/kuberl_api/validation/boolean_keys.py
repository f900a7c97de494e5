"""verl keys that kubectl's YAML turns into booleans (``rollout.n`` → ``"false"``).

Go's YAML 1.1 reads an unquoted ``n:`` as the boolean ``false``, and kubectl sends the key as
``"false"``. verl users write ``rollout: {n: 5}``; quoting it (``"n": 5``) is not something they
know to do. kuberl accepts kubectl's spelling as an alias:

* the CRD declares the alias property (``false`` beside ``n``) with the same type, and a CEL rule
  refuses both at once (``kuberl_api.crd``), so ``kubectl apply`` works as written;
* the validation edge (CLI, operator, runtime) renames the alias back to the verl key, warning
  that kubectl will read the key that way (``kuberl validate`` reads files as kubectl does).

The keys come from the models: every field of ``backend_config`` named like a YAML 1.1 boolean.
"""

from functools import cache
from typing import Any

from pydantic import BaseModel

from kuberl_api.backend_config import BackendConfig
from kuberl_api.validation.problems import Problem, Severity, join_path
from kuberl_api.yamlio import BOOLEAN_WORDS


def alias_of(key: str) -> str:
    """``n`` → ``"false"``: the key kubectl sends for an unquoted ``key:``."""
    return "true" if BOOLEAN_WORDS[key] else "false"


@cache
def boolean_key_paths() -> tuple[tuple[str, ...], ...]:
    """Paths (inside backend_config) of every field whose name kubectl reads as a boolean."""
    return tuple(_walk(BackendConfig, ()))


def _walk(model: type[BaseModel], where: tuple[str, ...]) -> list[tuple[str, ...]]:
    found = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key in BOOLEAN_WORDS:
            found.append((*where, key))
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += _walk(annotation, (*where, key))
    return found


def normalise_boolean_keys(raw_backend: dict, bc: str) -> tuple[dict, list[Problem]]:
    """Rename kubectl's boolean spelling of a verl key back to the key (a copy)."""
    problems: list[Problem] = []
    tree = raw_backend
    for path in boolean_key_paths():
        *parents, key = path
        node = _lookup(tree, parents)
        alias = alias_of(key)
        if not isinstance(node, dict) or alias not in node:
            continue
        where = join_path(bc, *parents, alias)
        if key in node:
            problems.append(
                Problem(
                    where,
                    f"both {key} and {alias!r} are set ({alias!r} is how kubectl reads an "
                    f"unquoted {key}:)",
                    f"keep one: write {key!r}: <value> once, quoted",
                    node[alias],
                )
            )
            continue
        tree = _copy_path(tree, parents)
        parent = _lookup(tree, parents)
        parent[key] = parent.pop(alias)
        problems.append(
            Problem(
                where,
                f"read as {key} (kubectl turns an unquoted {key}: into the key {alias!r})",
                f"kuberl accepts it; write {key!r}: (quoted) to keep the key as written "
                "for other YAML readers",
                severity=Severity.WARNING,
            )
        )
    return tree, problems


def _lookup(tree: Any, parents: list[str]) -> Any:
    node = tree
    for key in parents:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _copy_path(tree: dict, parents: list[str]) -> dict:
    """A copy of ``tree`` where every mapping on ``parents`` is a fresh dict."""
    out = dict(tree)
    node = out
    for key in parents:
        node[key] = dict(node[key])
        node = node[key]
    return out
