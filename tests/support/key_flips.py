"""Flip a key to another valid value and compare the resolved plans (``Flipper``).

``candidates`` derives the values from the key's type and the value the base resolves it to,
best first. Nothing here knows a key by name: a key that needs a companion setting is listed,
with the reason, by the tests (``tests/api/keys/test_honoured_changes_*plan.py``).
"""

import copy
import json
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel

from kuberl_api.job import ModelArtsConfig
from kuberl_api.keys import ENVELOPE, KeyEntry
from kuberl_api.plan.from_document import plan_validated
from kuberl_api.validation import Document, DocumentKind, validate_document

_NONE = type(None)


def key_path(key: str) -> list[str]:
    """Where ``key`` sits in a ModelArts document (an envelope around ``backend_config``)."""
    if key.startswith(ENVELOPE):
        return key[len(ENVELOPE) :].split(".")
    return ["backend_config", *key.split(".")]


def annotation(root: type[BaseModel], path: list[str]) -> Any:
    model = root
    *parents, leaf = path
    for part in parents:
        model = _model_in(model.model_fields[part].annotation)
    return model.model_fields[leaf].annotation


def _model_in(annotation: Any) -> type[BaseModel]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next(
        a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)
    )


def _options(annotation: Any) -> list[Any]:
    """The non-null members of ``X | Y | None``, or ``[annotation]`` when it is no union."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not _NONE]
    return [annotation]


def _literal(options: list[Any]) -> tuple[Any, ...]:
    for option in options:
        if typing.get_origin(option) is typing.Literal:
            return typing.get_args(option)
    return ()


def candidates(entry: KeyEntry, value: Any, annotation: Any) -> list[Any]:
    """Values other than ``value`` that ``annotation`` admits (within ``entry.accepts``)."""
    options = _options(annotation)
    members = entry.accepts or _literal(options)
    if members and not isinstance(value, list):
        return [m for m in members if m != value and m is not None]
    kind = type(value) if value is not None else typing.get_origin(options[0]) or options[0]
    found = _by_kind(kind, value, options)
    return [c for c in found if c != value]


def _by_kind(kind: Any, value: Any, options: list[Any]) -> list[Any]:
    if kind is bool:
        return [not value] if value is not None else [True, False]
    if kind is int:
        start = [value // 2, value * 2, value + 1] if value and value > 0 else []
        return [*start, 1, 2, 3]
    if kind is float:
        return [value / 2, value * 2] if value else [0.5, 0.25]
    if kind is str:
        return [f"{value}-flipped" if value else "flipped"]
    if kind is list:
        return _lists(value or [], options)
    if kind is dict:
        return [{**(value or {}), "flipped": 1}]
    raise AssertionError(f"no flip for a value of type {kind}")


def _lists(value: list[Any], options: list[Any]) -> list[Any]:
    """Halve numbers; else a list of one more member, or one fewer, or one other string."""
    if value and all(isinstance(x, float) for x in value):
        return [[x / 2 for x in value]]
    items = [typing.get_args(o)[0] for o in options if typing.get_origin(o) is list]
    members = _literal(_options(items[0])) if items else ()
    more = [[*value, m] for m in members if m not in value]
    fewer = [value[:-1]] if len(value) > 1 else []
    return [*more, *fewer, [*value, "flipped"]]


@dataclass(frozen=True, eq=False)
class Flipper:
    """Flips keys of one config tree in a ModelArts document and compares the resolved plans.

    ``companions``: settings made in both documents, by row; a row is a key, or the start of
    keys when it is not a key itself; the longest row that fits a key holds."""

    base: dict[str, Any]
    """A ModelArts document: ``af_output_dir`` and ``backend_config`` (a PPO or an SFT tree)."""
    config: type[BaseModel]
    """The model of ``backend_config`` (``BackendConfig``, ``SFTConfig``), for key types."""
    registry: dict[str, KeyEntry]
    companions: dict[str, dict[str, Any]]

    def annotation(self, key: str) -> Any:
        path = key_path(key)
        if path[0] == "backend_config":
            return annotation(self.config, path[1:])
        return annotation(ModelArtsConfig, path)

    def companions_of(self, key: str) -> dict[str, Any]:
        rows = [
            r for r in self.companions if r == key or (r not in self.registry and key.startswith(r))
        ]
        return self.companions[max(rows, key=len)] if rows else {}

    def document(self, settings: dict[str, Any]) -> dict[str, Any]:
        tree = copy.deepcopy(self.base)
        for key, value in settings.items():
            *parents, leaf = key_path(key)
            node = tree
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        return tree

    def base_plan(self, settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return _base_plan(self, json.dumps(settings, sort_keys=True))

    def flip(self, entry: KeyEntry) -> tuple[list[Any], list[str], list[str]]:
        """(the valid values tried, the plan fields changed by the first one that changes the
        plan, the errors of every refused value). A value may mean what the base does already
        (``warmup_style: constant`` where it is unset), so the next valid one is tried."""
        settings = self.companions_of(entry.key)
        before, resolved = self.base_plan(settings)
        current = value_at(resolved, entry.key)
        valid: list[Any] = []
        refusals: list[str] = []
        for value in candidates(entry, current, self.annotation(entry.key)):
            plan, _, errors = resolve(self.document({**settings, entry.key: value}))
            refusals += [f"{value!r}: {e}" for e in errors]
            if plan is not None:
                valid.append(value)
                if found := changed(before, plan):
                    return valid, found, refusals
        return valid, [], refusals


@cache
def _base_plan(flipper: Flipper, settings: str) -> tuple[dict[str, Any], dict[str, Any]]:
    plan, resolved, errors = resolve(flipper.document(json.loads(settings)))
    assert plan is not None, errors
    return plan, resolved


def resolve(tree: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any], list[str]]:
    """(the plan but ``source``, the document with its config resolved, errors) of a ModelArts
    document: validation, then the resolver the operator and ``kuberl train`` call."""
    result = validate_document(Document(DocumentKind.MODELARTS, tree, "", "flip.yaml", {}))
    if not result.ok:
        return None, {}, [p.render() for p in result.errors]
    config = result.effective_config
    assert config is not None
    plan = json.loads(plan_validated(config, result.af_output_dir).to_json())
    del plan["source"], plan["source_digest"]
    return plan, {**tree, "backend_config": json.loads(config.model_dump_json())}, []


def value_at(tree: dict[str, Any], key: str) -> Any:
    node: Any = tree
    for part in key_path(key):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def changed(before: Any, after: Any, where: str = "") -> list[str]:
    """Dotted plan fields that differ."""
    if isinstance(before, dict) and isinstance(after, dict):
        keys = sorted(set(before) | set(after))
        return [f for k in keys for f in changed(before.get(k), after.get(k), f"{where}{k}.")]
    return [] if before == after else [where.rstrip(".")]
