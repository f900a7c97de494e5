"""Every leaf key of the job's config tree, found by walking the pydantic models.

A leaf is a field whose type is not itself a config model: a scalar, a list, or a free-form
``dict``. Sub-models (``actor.optim``) are walked into, so a shared model (``FSDPConfig``)
yields its leaves once per place it sits.
"""

import types
import typing
from typing import Any

from pydantic import BaseModel

from kuberl_api.backend_config import BackendConfig
from kuberl_api.job import ModelArtsConfig
from kuberl_api.keys.entry import ENVELOPE


def schema_leaves() -> dict[str, Any]:
    """Dotted key -> schema default (``None`` when the default is computed) for every leaf."""
    leaves = dict(_walk(BackendConfig, ""))
    for name, default in _walk(ModelArtsConfig, ""):
        if not name.startswith("backend_config."):
            leaves[ENVELOPE + name] = default
    return leaves


def _walk(model: type[BaseModel], prefix: str) -> typing.Iterator[tuple[str, Any]]:
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        sub = _sub_model(field.annotation)
        if sub is not None:
            yield from _walk(sub, key + ".")
        else:
            # A required key (model.path, data.train_files) has no default: None, as computed ones.
            default = None if field.is_required() else field.get_default(call_default_factory=True)
            yield key, default


def _sub_model(annotation: Any) -> type[BaseModel] | None:
    """The config model inside ``annotation`` (``X`` or ``X | None``), if there is one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if _sub_model(a) is not None]
        return models[0] if len(models) == 1 else None
    return None


def walk_leaves(model: type[BaseModel]) -> typing.Iterator[tuple[str, Any]]:
    """Dotted key -> schema default for every leaf of ``model`` (another tree: SFT's)."""
    yield from _walk(model, "")
