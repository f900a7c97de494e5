"""Tools a multi-turn rollout calls (verl's tool config and function tools; built-ins)."""

from kuberl_runtime.tools.base import Tool, ToolError, ToolOutput
from kuberl_runtime.tools.builtin import CalculatorTool, Gsm8kTool
from kuberl_runtime.tools.config import load_tool_config, load_tools
from kuberl_runtime.tools.function_tool import function_tool, load_function_tools

__all__ = [
    "CalculatorTool",
    "Gsm8kTool",
    "Tool",
    "ToolError",
    "ToolOutput",
    "function_tool",
    "load_function_tools",
    "load_tool_config",
    "load_tools",
]
