"""Function tools: plain Python functions from ``multi_turn.function_tool_path``.

As in verl, the schema comes from the signature and the Google-style docstring
(``transformers.utils.get_json_schema``): a type hint on every parameter and an ``Args:`` block.
The file either marks its tools with ``@function_tool`` (``from kuberl_runtime.tools import
function_tool``, optionally ``@function_tool("name")``), or, when it marks none, every public
function defined in the file is a tool. Returns follow verl: a string, a dict, or
``(response[, reward[, metrics]])``. A function tool has no per-trajectory state.
"""

from __future__ import annotations

import importlib.util
import inspect
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kuberl_runtime.tools.base import ToolError

MARK = "__kuberl_function_tool__"


def function_tool(name: str | Callable[..., Any] | None = None) -> Any:
    """Mark a function as a tool (bare ``@function_tool`` or ``@function_tool("name")``)."""

    def mark(fn: Callable[..., Any], tool: str | None) -> Callable[..., Any]:
        setattr(fn, MARK, tool or fn.__name__)
        return fn

    if callable(name):
        return mark(name, None)
    return lambda fn: mark(fn, name)


class FunctionTool:
    def __init__(self, name: str, fn: Callable[..., Any], schema: dict[str, Any]) -> None:
        self.name = name
        self.fn = fn
        self.schema = schema

    def create(self, instance_id: str | None = None, **kwargs: Any) -> str:
        return instance_id or uuid.uuid4().hex

    def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> Any:
        return self.fn(**parameters)

    def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    def release(self, instance_id: str, **kwargs: Any) -> None:
        return None


def load_function_tools(path: str) -> list[FunctionTool]:
    file = Path(path)
    where = f"actor_rollout_ref.rollout.multi_turn.function_tool_path={path!r}"
    if not file.is_file():
        raise ToolError(f"{where}: no such file; point it at a .py file of tool functions")
    spec = importlib.util.spec_from_file_location(f"kuberl_function_tools_{file.stem}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as err:
        if err.name is None or not err.name.startswith("verl"):
            raise
        raise ToolError(
            f"{where}: the file imports {err.name} (verl is not installed in kuberl's image); "
            "write `from kuberl_runtime.tools import function_tool` instead of verl's import, "
            "the decorator is used the same way"
        ) from err
    defined = [
        fn
        for fn in vars(module).values()
        if inspect.isfunction(fn) and fn.__module__ == module.__name__
    ]
    marked = [fn for fn in defined if hasattr(fn, MARK)]
    chosen = marked or [fn for fn in defined if not fn.__name__.startswith("_")]
    if not chosen:
        raise ToolError(f"{where}: the file defines no function; define one per tool")
    return [_tool(fn, getattr(fn, MARK, fn.__name__), where) for fn in chosen]


def _tool(fn: Callable[..., Any], name: str, where: str) -> FunctionTool:
    from transformers.utils import get_json_schema

    try:
        schema = get_json_schema(fn)
    except Exception as err:
        raise ToolError(
            f"{where}: function {fn.__name__!r} has no usable schema ({err}); give every "
            "parameter a type hint and describe it in a Google-style docstring's Args: block"
        ) from err
    schema["function"]["name"] = name
    return FunctionTool(name, fn, schema)
