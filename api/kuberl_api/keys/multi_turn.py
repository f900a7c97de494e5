"""Fates of ``actor_rollout_ref.rollout.multi_turn.*`` and ``rollout.agent.*``."""

from kuberl_api.keys.entry import honoured, no_effect, refused
from kuberl_api.keys.where import LOOP, RT

MT = "actor_rollout_ref.rollout.multi_turn."
AGENT = "actor_rollout_ref.rollout.agent."
MULTI_TURN = RT + "rollout/multi_turn.py"
TOOLS = RT + "tools/config.py"
AGENT_LOOPS = ("single_turn_agent", "tool_agent")
NO_CUSTOM_LOOP = (
    "custom agent loops are not supported; remove it (kuberl runs " + ", ".join(AGENT_LOOPS) + ")"
)

KEYS = [
    honoured(MT + "enable", LOOP),
    *[
        honoured(MT + k, MULTI_TURN)
        for k in (
            "max_assistant_turns",
            "max_user_turns",
            "max_parallel_calls",
            "max_tool_response_length",
            "tool_response_truncate_side",
            "tokenization_sanity_check_mode",
            "tool_timeout",  # kuberl extension: verl's agent loop waits on a tool forever
        )
    ],
    honoured(MT + "tool_config_path", TOOLS),
    honoured(MT + "function_tool_path", TOOLS),
    refused(
        MT + "format",
        "kuberl parses hermes tool calls (<tool_call>{json}</tool_call>); set hermes",
        allowed=("hermes",),
    ),
    refused(
        MT + "use_inference_chat_template",
        "kuberl renders every turn with the tokenizer's one chat template; remove it or false",
    ),
    refused(MT + "num_repeat_rollouts", "interaction rollouts are not supported; remove it"),
    honoured(
        AGENT + "default_agent_loop",
        MULTI_TURN,
        accepts=AGENT_LOOPS,
        fix="set single_turn_agent or tool_agent (custom agent loops are not supported)",
    ),
    no_effect(
        AGENT + "num_workers",
        "verl's agent-loop worker count; kuberl runs each rank's rows turn by turn in its "
        "rollout process",
    ),
    refused(AGENT + "agent_loop_config_path", NO_CUSTOM_LOOP),
    refused(AGENT + "custom_async_server.path", NO_CUSTOM_LOOP),
    refused(AGENT + "custom_async_server.name", NO_CUSTOM_LOOP),
    refused(AGENT + "agent_loop_manager_class", NO_CUSTOM_LOOP),
]
