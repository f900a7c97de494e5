"""verl's multi-turn keys (``rollout.multi_turn.*``, ``rollout.agent.*``) validate, resolve into
the plan's ``rollout.multi_turn`` and refuse what kuberl does not run, naming key, value and fix.
"""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberl_api.plan import build_run_plan
from kuberl_api.validation import Document, DocumentKind, validate_document
from kuberl_api.validation.documents import set_dotted

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
R = "actor_rollout_ref.rollout."
MT = R + "multi_turn."
# verl's GSM8K multi-turn GRPO config (examples/sglang_multiturn/config/gsm8k_multiturn_grpo.yaml,
# with the agent loop its tool_agent data rows name) on the HF rollout.
VERL_GSM8K = {
    "data.return_raw_chat": True,
    MT + "enable": True,
    MT + "max_assistant_turns": 5,
    MT + "format": "hermes",
    MT + "tool_config_path": "/tools/gsm8k_tool_config.yaml",
    R + "agent.default_agent_loop": "tool_agent",
}


def _validate(settings: dict[str, Any]) -> Any:
    tree = copy.deepcopy(DEMO)
    for key, value in settings.items():
        set_dotted(tree, key, value)
    return validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))


def test_verls_gsm8k_multi_turn_config_resolves_into_the_plan():
    settings = {
        **VERL_GSM8K,
        MT + "max_parallel_calls": 2,
        MT + "max_tool_response_length": 64,
        MT + "tool_response_truncate_side": "left",
        MT + "tokenization_sanity_check_mode": "ignore_strippable",
        MT + "function_tool_path": "/tools/functions.py",
        MT + "max_user_turns": 4,
        MT + "tool_timeout": 2.5,
    }
    result = _validate(settings)
    assert result.ok, [p.render() for p in result.errors]
    plan = build_run_plan(result.backend_config).rollout.multi_turn
    assert plan.enable and plan.default_agent_loop == "tool_agent"
    assert (plan.max_assistant_turns, plan.max_user_turns) == (5, 4)
    assert plan.tool_config_path == "/tools/gsm8k_tool_config.yaml"
    assert plan.function_tool_path == "/tools/functions.py"
    assert (plan.max_parallel_calls, plan.max_tool_response_length) == (2, 64)
    assert plan.tool_response_truncate_side == "left"
    assert plan.tokenization_sanity_check_mode == "ignore_strippable"
    assert plan.tool_timeout == 2.5


def test_off_by_default_with_verls_defaults():
    plan = build_run_plan(_validate({}).backend_config).rollout.multi_turn
    assert not plan.enable and plan.default_agent_loop == "single_turn_agent"
    assert (plan.max_assistant_turns, plan.max_parallel_calls) == (0, 1)
    assert (plan.max_tool_response_length, plan.tool_response_truncate_side) == (256, "middle")
    assert plan.tool_timeout == 60.0  # kuberl's key; verl's agent loop has no tool timeout


@pytest.mark.parametrize(
    ("key", "value", "fix"),
    [
        (MT + "format", "gpt-oss", "hermes"),
        (R + "agent.default_agent_loop", "my_agent", "single_turn_agent or tool_agent"),
        (R + "agent.agent_loop_config_path", "/loops.yaml", "custom agent loops"),
        (MT + "use_inference_chat_template", True, "one chat template"),
        (MT + "tool_response_truncate_side", "both", "middle"),
        (MT + "tokenization_sanity_check_mode", "lenient", "strict"),
        (MT + "max_parallel_calls", 0, "greater than 0"),
        (MT + "tool_timeout", 0, "greater than 0"),
        ("data.return_raw_chat", False, "return_raw_chat: true"),
    ],
)
def test_unsupported_values_are_refused_naming_key_value_and_fix(key, value, fix):
    result = _validate({**VERL_GSM8K, key: value})
    text = "\n".join(p.render() for p in result.errors)
    assert not result.ok
    assert key.rsplit(".", 1)[-1] in text and str(value) in text and fix in text, text


def test_a_tool_agent_without_multi_turn_is_refused():
    result = _validate({R + "agent.default_agent_loop": "tool_agent"})
    (problem,) = result.errors
    assert problem.path.endswith("rollout.agent.default_agent_loop")
    assert "multi_turn.enable: true" in problem.render() and "tool_agent" in problem.render()


def test_tools_without_multi_turn_or_multi_turn_without_tools_warn():
    off = _validate({MT + "tool_config_path": "/tools/t.yaml"})
    assert off.ok and any("multi_turn.enable" in w.render() for w in off.warnings)
    bare = _validate({MT + "enable": True})
    assert bare.ok and any("no tool is configured" in w.render() for w in bare.warnings)


def test_a_max_model_len_below_the_trajectory_is_refused():
    result = _validate({**VERL_GSM8K, R + "max_model_len": 16})
    (problem,) = result.errors
    assert problem.path.endswith("rollout.max_model_len") and "got 16" in problem.render()
