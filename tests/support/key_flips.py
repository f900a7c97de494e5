"""Another valid value of a key, derived from its type and the value the base resolves it to.

``candidates`` lists the values a flip may take, best first. Nothing here knows a key by name:
a key that needs a companion setting is listed, with the reason, in
``tests/api/keys/test_honoured_changes_plan.py`` (``COMPANIONS``).
"""

import types
import typing
from typing import Any

from pydantic import BaseModel

from kuberl_api.keys import ENVELOPE, KeyEntry

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
