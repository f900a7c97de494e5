"""Reading ``status`` tolerantly: what cannot be understood is reported, never fatal.

Status is written by this operator, by an older or newer one (a rollback keeps the newer CRD
schema, helm never downgrades CRDs) and, for ``progress``/``checkpoint``, by the job's runtime.
Unknown fields are set aside (kept in the object, not rewritten); a field of the wrong shape is
dropped (the operator rewrites its own, the runtime's are ignored until fixed); a runtime
timestamp that does not parse is ignored. Each becomes one line of the StatusReadable condition.
"""

import json
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from kuberl_api.job import RLTrainingJobStatus
from kuberl_operator import conditions as cond

RUNTIME_TIMES = (("progress", "lastUpdateTime"), ("checkpoint", "lastSavedTime"))
MAX_PROGRESS_METRICS = 64
MAX_PROGRESS_METRICS_BYTES = 16 * 1024
"""The runtime reports a few headline metrics; past these caps ``progress.metrics`` is removed
from the job (a runaway or hostile runtime would otherwise grow the object until every status
write fails)."""


def oversized_metrics(raw: dict[str, Any]) -> str | None:
    """Why ``status.progress.metrics`` is over its cap, or None."""
    progress = raw.get("progress")
    metrics = progress.get("metrics") if isinstance(progress, dict) else None
    if not isinstance(metrics, dict):
        return None
    if len(metrics) > MAX_PROGRESS_METRICS:
        return (
            f"status.progress.metrics: {len(metrics)} entries, over the cap of "
            f"{MAX_PROGRESS_METRICS} (removed)"
        )
    size = len(json.dumps(metrics, default=str))
    if size > MAX_PROGRESS_METRICS_BYTES:
        return (
            f"status.progress.metrics: {size // 1024} KiB, over the cap of "
            f"{MAX_PROGRESS_METRICS_BYTES // 1024} KiB (removed)"
        )
    return None


def read_status(raw: dict[str, Any]) -> tuple[RLTrainingJobStatus, list[str], set[str]]:
    """The status model, the problems found, and the top-level keys to leave as they are."""
    problems: list[str] = []
    kept: dict[str, Any] = {}
    unknown: set[str] = set()
    fields = _aliases(RLTrainingJobStatus)
    for key, value in raw.items():
        if key not in fields:
            unknown.add(key)
            problems.append(f"status.{key}: not a field this operator knows (left as is)")
            continue
        clean = _strip_unknown(fields[key], value, f"status.{key}", problems)
        try:
            RLTrainingJobStatus.model_validate({key: clean})
        except ValidationError as err:
            problems.append(f"status.{key}: {_first_error(err)} (ignored)")
            continue
        kept[key] = clean
    for parent, child in RUNTIME_TIMES:
        node = kept.get(parent)
        if isinstance(node, dict) and child in node:
            try:
                cond.parse_time(node[child])
            except (TypeError, ValueError):
                problems.append(f"status.{parent}.{child}: not a timestamp (ignored)")
                kept[parent] = {k: v for k, v in node.items() if k != child}
    return RLTrainingJobStatus.model_validate(kept), problems, unknown


def _aliases(model: type[BaseModel]) -> dict[str, Any]:
    return {(info.alias or name): info.annotation for name, info in model.model_fields.items()}


def _model_in(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model class inside ``Model``, ``Model | None`` or ``list[Model]``; is it a list?"""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found, many = _model_in(arg)
            if found is not None:
                return found, many
        return None, False
    if origin is list:
        (item,) = typing.get_args(annotation) or (None,)
        found, _ = _model_in(item)
        return found, found is not None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def _strip_unknown(annotation: Any, value: Any, path: str, problems: list[str]) -> Any:
    model, many = _model_in(annotation)
    if model is None:
        return value
    if many and isinstance(value, list):
        return [
            _strip_unknown(model, item, f"{path}[{i}]", problems) for i, item in enumerate(value)
        ]
    if not isinstance(value, dict):
        return value
    fields = _aliases(model)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in fields:
            out[key] = _strip_unknown(fields[key], item, f"{path}.{key}", problems)
        else:
            problems.append(f"{path}.{key}: not a field this operator knows (left as is)")
    return out


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"][1:])
    return (f"{where}: " if where else "") + first["msg"]
