"""Tools as verl users write them: verl's tool config YAML, function tools from a file,
the built-ins."""

from __future__ import annotations

import asyncio

import pytest

from kuberl_runtime.rollout.tool_calls import ToolCall, ToolSession, parse_hermes, truncate_response
from kuberl_runtime.tools import ToolError, load_tools
from kuberl_runtime.tools.builtin import evaluate

# verl's examples/sglang_multiturn/config/tool_config/gsm8k_tool_config.yaml, as users have it.
GSM8K_TOOL_CONFIG = """
tools:
  - class_name: "verl.tools.gsm8k_tool.Gsm8kTool"
    config:
      type: native
    tool_schema:
      type: "function"
      function:
        name: "calc_gsm8k_reward"
        description: "A tool for calculating the reward of gsm8k."
        parameters:
          type: "object"
          properties:
            answer:
              type: "string"
              description: "The model's answer to the GSM8K math problem, must be a digits"
          required: ["answer"]
"""

USER_TOOL = '''
class Counter:
    """A stateful tool written against verl's BaseTool methods, without importing verl."""

    def __init__(self, config, tool_schema):
        self.config, self.tool_schema = config, tool_schema
        self.name = tool_schema["function"]["name"]
        self.counts = {}

    async def create(self, instance_id=None, create_kwargs=None, **kwargs):
        self.counts["one"] = (create_kwargs or {}).get("start", 0)
        return "one", None

    async def execute(self, instance_id, parameters, **kwargs):
        self.counts[instance_id] += parameters["by"]
        return str(self.counts[instance_id]), 0.5, {"seen": 1}

    async def calc_reward(self, instance_id, **kwargs):
        return float(self.counts[instance_id])

    async def release(self, instance_id, **kwargs):
        del self.counts[instance_id]
'''

FUNCTIONS = '''
def add(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return str(a + b)


def _helper() -> None:
    pass
'''


def _call(session: ToolSession, name: str, **arguments):
    return asyncio.run(session.call(ToolCall(name, arguments), timeout_s=5)).output


def test_verl_gsm8k_tool_config_loads_the_built_in_and_scores(tmp_path):
    path = tmp_path / "gsm8k_tool_config.yaml"
    path.write_text(GSM8K_TOOL_CONFIG)
    tools = load_tools(str(path), None)
    assert list(tools) == ["calc_gsm8k_reward"]
    assert tools["calc_gsm8k_reward"].schema["function"]["parameters"]["required"] == ["answer"]
    session = ToolSession(tools, {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": "72"}}})
    wrong = _call(session, "calc_gsm8k_reward", answer="70")
    right = _call(session, "calc_gsm8k_reward", answer="72")
    assert "reward=0.0" in wrong.text and wrong.reward == -0.05
    assert "reward=1.0" in right.text and right.reward == 0.0
    assert asyncio.run(session.finish()) == {"calc_gsm8k_reward": 1.0}
    assert session.instances == {}


def test_a_users_class_with_verls_lifecycle(tmp_path, monkeypatch):
    (tmp_path / "my_tools.py").write_text(USER_TOOL)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "tools.yaml"
    config.write_text(
        "tools:\n  - class_name: my_tools.Counter\n    config: {}\n"
        "    tool_schema: {type: function, function: {name: counter, parameters: {}}}\n"
    )
    tools = load_tools(str(config), None)
    session = ToolSession(tools, {"counter": {"create_kwargs": {"start": 10}}})
    first = _call(session, "counter", by=2)
    second = _call(session, "counter", by=3)
    assert (first.text, first.reward, first.metrics) == ("12", 0.5, {"seen": 1})
    assert second.text == "15"  # one instance per trajectory keeps its state
    assert asyncio.run(session.finish()) == {"counter": 15.0}
    assert tools["counter"].counts == {}  # released


def test_function_tools_from_a_file_take_their_schema_from_the_docstring(tmp_path):
    path = tmp_path / "functions.py"
    path.write_text(FUNCTIONS)
    tools = load_tools(None, str(path))
    assert list(tools) == ["add"]
    schema = tools["add"].schema["function"]
    assert schema["description"] == "Add two integers."
    assert schema["parameters"]["properties"]["a"] == {
        "type": "integer",
        "description": "the first number",
    }
    assert _call(ToolSession(tools), "add", a=2, b=40).text == "42"


def test_marked_function_tools_only(tmp_path):
    path = tmp_path / "marked.py"
    path.write_text(
        "from kuberl_runtime.tools import function_tool\n"
        + FUNCTIONS.replace("def add", '@function_tool("plus")\ndef add')
        + "\ndef other(x: int) -> int:\n    '''Other.\n\n    Args:\n        x: x\n    '''\n"
        "    return x\n"
    )
    assert list(load_tools(None, str(path))) == ["plus"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("tools: []", "no 'tools:' list"),
        ("tools:\n  - config: {}\n", "needs a class_name"),
        (
            "tools:\n  - class_name: nowhere.Tool\n    tool_schema: {function: {name: x}}\n",
            "nowhere",
        ),
        (
            "tools:\n  - class_name: kuberl.tools.calculator\n    tool_schema: {function: {}}\n",
            "name",
        ),
    ],
)
def test_bad_tool_configs_name_the_key_and_the_fix(tmp_path, text, fragment):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ToolError) as err:
        load_tools(str(path), None)
    assert "multi_turn.tool_config_path" in str(err.value) and fragment in str(err.value)


def test_two_tools_of_one_name_are_refused(tmp_path):
    path = tmp_path / "functions.py"
    path.write_text(FUNCTIONS.replace("def add", "def calculator"))
    config = tmp_path / "tools.yaml"
    config.write_text(
        "tools:\n  - class_name: kuberl.tools.calculator\n"
        "    tool_schema: {type: function, function: {name: calculator}}\n"
    )
    with pytest.raises(ToolError, match="two tools are named 'calculator'"):
        load_tools(str(config), str(path))


def test_calculator_evaluates_arithmetic_only():
    assert evaluate("1234 * 5678") == 7006652
    assert evaluate("(2 + 3) ** 2 - 7 // 2") == 22
    for bad in ("__import__('os')", "2 ** 1000", "x + 1"):
        with pytest.raises(ValueError):
            evaluate(bad)


def test_hermes_parsing_and_verls_truncation():
    text = (
        'a<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'
        "<tool_call>not json</tool_call>"
        '<tool_call>\n{"name": "g", "arguments": "{\\"y\\": 2}"}\n</tool_call>'
    )
    assert parse_hermes(text) == [ToolCall("f", {"x": 1}), ToolCall("g", '{"y": 2}')]
    assert truncate_response("abcdefghij", 4, "left") == "(truncated)...ghij"
    assert truncate_response("abcdefghij", 4, "right") == "abcd...(truncated)"
    assert truncate_response("abcdefghij", 4, "middle") == "ab...(truncated)...ij"
    assert truncate_response("abcd", 4, "middle") == "abcd"
