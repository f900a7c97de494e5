"""Tools from verl's files: the tool config YAML and the function tool file.

The YAML (``multi_turn.tool_config_path``) is verl's::

    tools:
      - class_name: verl.tools.gsm8k_tool.Gsm8kTool   # or your_module.YourTool
        config: {type: native}
        tool_schema: {type: function, function: {name: ..., description: ..., parameters: ...}}

``class_name`` is a dotted path importable in the job's image (or a built-in's name,
``builtin.BUILTIN_CLASSES``); the class is built as ``cls(config=..., tool_schema=...)``.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import yaml

from kuberl_runtime.tools.base import Tool, ToolError, tool_name
from kuberl_runtime.tools.builtin import BUILTIN_CLASSES
from kuberl_runtime.tools.function_tool import load_function_tools

KEY = "actor_rollout_ref.rollout.multi_turn.tool_config_path"


def load_tools(tool_config_path: str | None, function_tool_path: str | None) -> dict[str, Tool]:
    """Every configured tool by name; two tools of one name are refused."""
    tools: list[Tool] = []
    if tool_config_path:
        tools += load_tool_config(tool_config_path)
    if function_tool_path:
        tools += load_function_tools(function_tool_path)
    by_name: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in by_name:
            raise ToolError(
                f"two tools are named {tool.name!r} (tool_config_path / function_tool_path); "
                "rename one in its schema or function"
            )
        by_name[tool.name] = tool
    return by_name


def load_tool_config(path: str) -> list[Tool]:
    where = f"{KEY}={path!r}"
    file = Path(path)
    if not file.is_file():
        raise ToolError(f"{where}: no such file; point it at verl's tool config YAML")
    document = yaml.safe_load(file.read_text()) or {}
    entries = document.get("tools") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ToolError(f"{where}: no 'tools:' list; write tools: [{{class_name, config, ...}}]")
    return [_build(entry, f"{where} tools[{i}]") for i, entry in enumerate(entries)]


def _build(entry: Any, where: str) -> Tool:
    if not isinstance(entry, dict) or not isinstance(entry.get("class_name"), str):
        raise ToolError(f"{where}: each tool needs a class_name (a dotted class path)")
    schema = entry.get("tool_schema")
    if not isinstance(schema, dict):
        raise ToolError(f"{where}: tool_schema missing; write verl's OpenAI function schema")
    tool_name(schema, where)
    cls = _class(entry["class_name"], where)
    tool = cls(config=dict(entry.get("config") or {}), tool_schema=schema)
    if not hasattr(tool, "schema"):
        tool.schema = schema
    if not hasattr(tool, "name"):
        tool.name = tool_name(schema, where)
    missing = [m for m in ("create", "execute", "calc_reward", "release") if not hasattr(tool, m)]
    if missing:
        raise ToolError(f"{where}: class_name {entry['class_name']!r} lacks {missing}")
    return tool


def _class(class_name: str, where: str) -> type:
    if class_name in BUILTIN_CLASSES:
        return BUILTIN_CLASSES[class_name]
    module_name, _, attr = class_name.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as err:
        raise ToolError(
            f"{where}: class_name={class_name!r} cannot be imported ({err}); install its module "
            f"in the job's image or use a built-in: {', '.join(BUILTIN_CLASSES)}"
        ) from err
