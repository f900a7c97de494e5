"""``null`` (and OmegaConf's ``???``) mean "not set": verl's default applies.

verl's generated config writes many keys as ``null`` where kuberl's model has a plain default
(``reward_model.enable: null``, ``custom_reward_function.name: null``), and marks keys the user
must fill with ``???`` (``rollout.name``). kuberl drops such a key before the schema reads the
tree when the model's field cannot hold null, so its default (verl's) applies; a field that can
hold null keeps it (null has a meaning there). ``???`` is dropped everywhere: kuberl has a
default for every key verl leaves mandatory.
"""

import types
import typing
from typing import Any

from pydantic import BaseModel

from kuberl_api.backend_config import BackendConfig

MISSING = "???"


def drop_unset(tree: dict) -> dict:
    """A copy of the backend_config ``tree`` without nulls kuberl's model cannot hold."""
    return _walk(tree, BackendConfig)


def _walk(node: dict, model: type[BaseModel]) -> dict:
    out = {}
    for key, value in node.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if value == MISSING or (value is None and field is not None and not _nullable(field)):
            continue
        sub = _sub_model(field.annotation) if field is not None else None
        out[key] = _walk(value, sub) if sub is not None and isinstance(value, dict) else value
    return out


def _nullable(field: Any) -> bool:
    annotation = field.annotation
    if annotation is Any or annotation is None:
        return True
    return type(None) in typing.get_args(annotation)


def _sub_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if _sub_model(a) is not None]
        return models[0] if len(models) == 1 else None
    return None


def drop_unset_in(tree: dict, model: type[BaseModel]) -> dict:
    """``drop_unset`` for another schema's tree (the SFT config's)."""
    return _walk(tree, model)
