"""pydantic's errors, translated into Problems with dotted paths and hints a user can act on."""

import difflib
import types
import typing
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

from kuberl_api.validation.problems import Problem, join_path

_TYPE_WORDS = {
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
}


def problems_from_validation_error(
    err: ValidationError, model: type[BaseModel], prefix: str
) -> list[Problem]:
    problems: dict[str, Problem] = {}
    for error in err.errors():
        segments, annotation, in_union = _walk(model, error["loc"])
        path = join_path(prefix, *segments)
        if in_union:
            problem = Problem(path, f"must be {_describe(annotation)}", "", error["input"])
        else:
            problem = _problem(error, path, segments, annotation, model)
        problems.setdefault(path, problem)
    return list(problems.values())


def _problem(
    error: dict, path: str, segments: list, annotation: Any, root: type[BaseModel]
) -> Problem:
    kind, value = error["type"], error.get("input")
    if kind == "missing":
        return Problem(path, "required key is missing", f"add {segments[-1]}")
    if kind == "extra_forbidden":
        return _unknown_key(path, str(segments[-1]), model_at(root, error["loc"][:-1]))
    if kind in _TYPE_WORDS:
        hint = "remove the quotes" if isinstance(value, str) and _looks_numeric(value) else ""
        return Problem(path, f"must be {_TYPE_WORDS[kind]}", hint, value)
    if kind == "literal_error":
        choices = [str(c) for c in get_args(_unwrap_optional(annotation))]
        guess = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5)
        hint = f"did you mean '{guess[0]}'?" if guess else ""
        return Problem(path, f"must be one of {', '.join(choices)}", hint, value)
    message = error["msg"][0].lower() + error["msg"][1:]
    return Problem(path, message.replace("input should", "must"), _described(root, error), value)


def _described(root: type[BaseModel], error: dict) -> str:
    """The field's own description is the best hint pydantic's generic messages can get."""
    parent = model_at(root, error["loc"][:-1])
    field = _field_by_key(parent, error["loc"][-1]) if parent else None
    return f"expected: {field.description}" if field and field.description else ""


def _unknown_key(path: str, key: str, parent: type[BaseModel] | None) -> Problem:
    parent_path = path[: -len(key)].rstrip(".")
    candidates = model_keys(parent) if parent else []
    match = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    if match:
        hint = f"did you mean {join_path(parent_path, match[0])}?"
    else:
        hint = f"valid keys here: {', '.join(sorted(candidates))}" if candidates else ""
    return Problem(path, "unknown key", hint)


def _walk(model: type[BaseModel], loc: tuple) -> tuple[list, Any, bool]:
    """Follow ``loc`` through the type tree: cleaned path, annotation reached, hit a union."""
    segments: list = []
    annotation: Any = model
    for part in loc:
        annotation = _unwrap_optional(annotation)
        if _is_union(annotation):
            return segments, annotation, True
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = _field_by_key(annotation, part)
            segments.append(part)
            annotation = field.annotation if field else None
        elif get_origin(annotation) is list and isinstance(part, int):
            segments.append(part)
            annotation = get_args(annotation)[0]
        elif get_origin(annotation) is dict:
            segments.append(part)
            annotation = get_args(annotation)[1]
        else:
            segments.append(part)
            annotation = None
    return segments, annotation, False


def model_keys(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def model_at(root: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    _, annotation, in_union = _walk(root, loc)
    annotation = _unwrap_optional(annotation)
    if in_union or not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return None
    return annotation


def _field_by_key(model: type[BaseModel], key: Any):
    for name, field in model.model_fields.items():
        if key in (field.alias, name):
            return field
    return None


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (typing.Union, types.UnionType)


def _unwrap_optional(annotation: Any) -> Any:
    if _is_union(annotation):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
        return typing.Union[tuple(members)]  # noqa: UP007 - rebuilding a runtime union
    return annotation


def _describe(annotation: Any) -> str:
    annotation = _unwrap_optional(annotation)
    if _is_union(annotation):
        return " or ".join(_describe(a) for a in get_args(annotation))
    origin = get_origin(annotation)
    if origin is list:
        return f"a list of {_plural(get_args(annotation)[0])}"
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in get_args(annotation))
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(
        annotation, "a mapping"
    )


def _plural(annotation: Any) -> str:
    return {str: "strings", int: "integers", float: "numbers"}.get(annotation, "values")


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
