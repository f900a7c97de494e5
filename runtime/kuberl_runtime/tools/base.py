"""The tool interface: verl's lifecycle without importing verl.

A tool is any object with a ``name``, an OpenAI function ``schema`` (``{"type": "function",
"function": {"name", "description", "parameters"}}``) and four methods, sync or ``async``:

* ``create(instance_id=None, create_kwargs=None, ...) -> instance_id`` (or ``(instance_id, _)``
  as verl's BaseTool returns): one instance per trajectory, made at the trajectory's first call;
* ``execute(instance_id, parameters, **execute_kwargs) -> (response, reward, metrics)`` (or just
  a response): ``response`` is a string, a dict (sent as JSON) or an object with ``text``;
* ``calc_reward(instance_id) -> float``: the tool's reward once the trajectory ends;
* ``release(instance_id)``.

A tool class written for verl (``verl.tools.base_tool.BaseTool``'s methods, ``__init__(config,
tool_schema)``) works unchanged once it stops subclassing verl's class.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Protocol


class ToolError(ValueError):
    """A tool configuration a user must fix (names the file, key and value)."""


@dataclass(frozen=True)
class ToolOutput:
    """One call's result: what the policy reads, the step reward, the tool's metrics."""

    text: str
    reward: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)


class Tool(Protocol):
    name: str
    schema: dict[str, Any]

    def create(self, instance_id: str | None = None, **kwargs: Any) -> Any: ...

    def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> Any: ...

    def calc_reward(self, instance_id: str, **kwargs: Any) -> Any: ...

    def release(self, instance_id: str, **kwargs: Any) -> Any: ...


async def resolved(value: Any) -> Any:
    """``value`` awaited when a coroutine (an ``async`` tool method), else as is."""
    return await value if inspect.isawaitable(value) else value


def response_text(response: Any) -> str:
    if response is None:
        return ""
    if isinstance(response, str):
        return response
    if isinstance(response, dict):
        return json.dumps(response, ensure_ascii=False)
    text = getattr(response, "text", None)
    return str(response) if text is None else str(text)


def as_output(returned: Any) -> ToolOutput:
    """A tool's return value as verl reads it: a response, or (response[, reward[, metrics]])."""
    if not isinstance(returned, tuple):
        return ToolOutput(response_text(returned))
    if not 1 <= len(returned) <= 3:
        raise TypeError(
            f"a tool returned a tuple of {len(returned)} items: {returned!r}; return "
            "(response,), (response, reward) or (response, reward, metrics)"
        )
    reward = 0.0 if len(returned) < 2 or returned[1] is None else float(returned[1])
    metrics = {} if len(returned) < 3 or returned[2] is None else dict(returned[2])
    return ToolOutput(response_text(returned[0]), reward, metrics)


def tool_name(schema: dict[str, Any], where: str) -> str:
    """The function name of an OpenAI tool schema, checked."""
    function = schema.get("function") if isinstance(schema, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        raise ToolError(
            f"{where}: tool_schema has no function.name (got {schema!r}); write "
            "{type: function, function: {name: ..., description: ..., parameters: {...}}}"
        )
    return name
