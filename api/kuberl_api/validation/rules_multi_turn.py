"""Rules of multi-turn rollouts with tools (``rollout.multi_turn``, ``rollout.agent``).

kuberl runs multi-turn rollouts only with ``multi_turn.enable``; otherwise every row is a single
turn, so a tool agent or tool files without it would be silently ignored: they are refused.
Multi-turn trajectories live within ``response_length`` (tool tokens included), so the context
never exceeds ``prompt_length + response_length``: a ``max_model_len`` below that is refused.
"""

from kuberl_api.backend_config import BackendConfig
from kuberl_api.validation.problems import Problem, Severity, join_path

ENABLE = "set actor_rollout_ref.rollout.multi_turn.enable: true"


def check_multi_turn(cfg: BackendConfig, bc: str) -> list[Problem]:
    rollout = cfg.actor_rollout_ref.rollout
    m, at = rollout.multi_turn, join_path(bc, "actor_rollout_ref", "rollout")
    if not m.enable:
        return _needs_enable(cfg, at)
    problems = []
    if not (m.tool_config_path or m.function_tool_path):
        problems.append(
            Problem(
                join_path(at, "multi_turn", "tool_config_path"),
                "multi-turn rollouts are on but no tool is configured, so no turn can call one",
                "set multi_turn.tool_config_path (verl's tool YAML) or function_tool_path",
                None,
                Severity.WARNING,
            )
        )
    if not cfg.data.return_raw_chat:
        problems.append(
            Problem(
                join_path(bc, "data", "return_raw_chat"),
                "multi-turn rollouts render each tool turn from the row's chat messages",
                "set data.return_raw_chat: true (verl's default)",
                False,
            )
        )
    length = (rollout.prompt_length or cfg.data.max_prompt_length) + (
        rollout.response_length or cfg.data.max_response_length
    )
    if rollout.max_model_len is not None and rollout.max_model_len < length:
        problems.append(
            Problem(
                join_path(at, "max_model_len"),
                f"a multi-turn trajectory's context reaches prompt + response length {length}",
                f"raise max_model_len to {length} or leave it null",
                rollout.max_model_len,
            )
        )
    return problems


def _needs_enable(cfg: BackendConfig, at: str) -> list[Problem]:
    rollout = cfg.actor_rollout_ref.rollout
    problems = []
    if rollout.agent.default_agent_loop == "tool_agent":
        problems.append(
            Problem(
                join_path(at, "agent", "default_agent_loop"),
                "tool_agent runs only in multi-turn rollouts, which are off",
                f"{ENABLE}, or use single_turn_agent",
                "tool_agent",
            )
        )
    m = rollout.multi_turn
    for key, value in (
        ("tool_config_path", m.tool_config_path),
        ("function_tool_path", m.function_tool_path),
    ):
        if value:
            problems.append(
                Problem(
                    join_path(at, "multi_turn", key),
                    "tools are loaded only for multi-turn rollouts, which are off",
                    f"{ENABLE}, or remove it",
                    value,
                    Severity.WARNING,
                )
            )
    return problems
