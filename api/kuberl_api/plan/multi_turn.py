"""The multi-turn section of the rollout plan (validated values: ``keys/multi_turn.py``)."""

from kuberl_api.backend_config.rollout import RolloutConfig
from kuberl_api.plan.sections import MultiTurnPlan


def multi_turn_section(r: RolloutConfig) -> MultiTurnPlan:
    m = r.multi_turn
    assert m.format == "hermes", "validation refuses other formats"
    agent = r.agent.default_agent_loop
    assert agent in ("single_turn_agent", "tool_agent"), "validation refuses other loops"
    return MultiTurnPlan(
        enable=m.enable,
        max_assistant_turns=m.max_assistant_turns or 0,
        max_user_turns=m.max_user_turns or 0,
        tool_config_path=m.tool_config_path or "",
        function_tool_path=m.function_tool_path or "",
        max_parallel_calls=m.max_parallel_calls,
        max_tool_response_length=m.max_tool_response_length,
        tool_response_truncate_side=m.tool_response_truncate_side,
        tokenization_sanity_check_mode=m.tokenization_sanity_check_mode,
        default_agent_loop=agent,
        tool_timeout=m.tool_timeout,
    )
