"""Built-in tools: a calculator and verl's GSM8K answer check (``calc_gsm8k_reward``)."""

from __future__ import annotations

import ast
import operator
import uuid
from typing import Any

from kuberl_runtime.rewards.gsm8k import compute_score
from kuberl_runtime.tools.base import tool_name
from kuberl_runtime.tools.sandbox_tool import PythonSandboxTool

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
MAX_EXPONENT = 64
MAX_EXPRESSION_CHARS = 200


def evaluate(expression: str) -> int | float:
    """An arithmetic expression's value; anything but numbers and + - * / // % ** is refused."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    return _value(ast.parse(expression.strip(), mode="eval").body)


def _value(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent {right} is larger than {MAX_EXPONENT}")
        return _BINARY[type(node.op)](left, right)
    raise ValueError(f"not arithmetic: {ast.unparse(node)!r}")


def _format(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


CALCULATOR_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression (+ - * / // % ** and parentheses).",
        "parameters": {
            "type": "object",
            "properties": {
                "expression": {"type": "string", "description": "e.g. 1234 * 5678"},
            },
            "required": ["expression"],
        },
    },
}


class CalculatorTool:
    """Stateless: each call evaluates its ``expression``; a bad one is reported as an error."""

    def __init__(self, config: dict[str, Any] | None = None, tool_schema: Any = None) -> None:
        self.config = dict(config or {})
        self.schema = dict(tool_schema or CALCULATOR_SCHEMA)
        self.name = tool_name(self.schema, "calculator tool")

    def create(self, instance_id: str | None = None, **kwargs: Any) -> str:
        return instance_id or uuid.uuid4().hex

    def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> Any:
        expression = parameters.get("expression")
        if not isinstance(expression, str):
            return f"Error: 'expression' must be a string, got {expression!r}", 0.0, {}
        try:
            return _format(evaluate(expression)), 0.0, {}
        except (ValueError, SyntaxError, ZeroDivisionError, OverflowError) as err:
            return f"Error: {err}", 0.0, {}

    def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    def release(self, instance_id: str, **kwargs: Any) -> None:
        return None


GSM8K_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "calc_gsm8k_reward",
        "description": "Check an answer to the GSM8K problem (1.0 if correct, 0.0 otherwise).",
        "parameters": {
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "the answer, digits"}},
            "required": ["answer"],
        },
    },
}
WORSE_PENALTY = -0.05


class Gsm8kTool:
    """verl's GSM8K tool: the answer is scored against the row's ``ground_truth``
    (``tools_kwargs.calc_gsm8k_reward.create_kwargs``) as ``#### <answer>`` with the flexible
    method; the step reward is 0 when the score improved, -0.05 otherwise."""

    def __init__(self, config: dict[str, Any] | None = None, tool_schema: Any = None) -> None:
        self.config = dict(config or {})
        self.schema = dict(tool_schema or GSM8K_SCHEMA)
        self.name = tool_name(self.schema, "GSM8K tool")
        self._instances: dict[str, dict[str, Any]] = {}

    def create(
        self,
        instance_id: str | None = None,
        ground_truth: str | None = None,
        create_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> str:
        instance_id = instance_id or uuid.uuid4().hex
        if ground_truth is None:
            ground_truth = (create_kwargs or {}).get("ground_truth")
        self._instances[instance_id] = {"ground_truth": ground_truth, "reward": 0.0}
        return instance_id

    def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> Any:
        answer = str(parameters.get("answer", ""))
        state = self._instances[instance_id]
        state["response"] = answer if answer.startswith("#### ") else "#### " + answer
        reward = self.calc_reward(instance_id)
        step_reward = 0.0 if reward > state["reward"] else WORSE_PENALTY
        state["reward"] = reward
        return f"Current parsed answer={answer!r} reward={reward}", step_reward, {}

    def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        state = self._instances[instance_id]
        truth = state["ground_truth"]
        if truth is None or "response" not in state:
            return 0.0
        return compute_score(state["response"], str(truth), method="flexible")

    def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)


BUILTIN_CLASSES: dict[str, type] = {
    "kuberl.tools.calculator": CalculatorTool,
    "kuberl.tools.gsm8k": Gsm8kTool,
    "kuberl.tools.python_sandbox": PythonSandboxTool,
    "verl.tools.gsm8k_tool.Gsm8kTool": Gsm8kTool,
}
"""``class_name`` values that name a built-in tool (verl's own GSM8K class path included)."""
