"""``actor_rollout_ref.rollout.multi_turn.*`` and ``rollout.agent.*``: verl 0.9.1 agentic rollouts.

Names and defaults are verl's (``MultiTurnConfig``, ``AgentLoopConfig``). The values kuberl
runs are narrowed in the key registry (``keys/multi_turn.py``): hermes tool calls, the
``single_turn_agent`` and ``tool_agent`` loops.
"""

from typing import Literal

from pydantic import Field

from kuberl_api.base import ConfigModel


class MultiTurnConfig(ConfigModel):
    enable: bool = False
    max_assistant_turns: int | None = Field(None, gt=0, description="Null: no turn limit.")
    max_user_turns: int | None = Field(None, gt=0, description="Null: no turn limit.")
    tool_config_path: str | None = Field(
        None, description="verl's tool config YAML (tools: class_name, config, tool_schema)."
    )
    function_tool_path: str | None = Field(
        None, description="A Python file of tool functions (schema from signature and docstring)."
    )
    max_parallel_calls: int = Field(1, gt=0, description="Tool calls run per assistant turn.")
    max_tool_response_length: int = Field(256, gt=0, description="Characters kept per response.")
    tool_response_truncate_side: Literal["left", "right", "middle"] = "middle"
    use_inference_chat_template: bool = False
    tokenization_sanity_check_mode: Literal["strict", "ignore_strippable", "disable"] = "strict"
    format: str = Field("hermes", description="The tool-call format the policy writes.")
    num_repeat_rollouts: int | None = None
    tool_timeout: float = Field(
        60.0,
        gt=0,
        description="kuberl option (verl has no such key): seconds each tool call may run before "
        "it fails and the policy reads the timeout.",
    )


class CustomAsyncServerConfig(ConfigModel):
    path: str | None = None
    name: str | None = None


class AgentLoopConfig(ConfigModel):
    num_workers: int = Field(8, gt=0)
    default_agent_loop: str = Field(
        "single_turn_agent", description="The agent loop of rows without an agent_name."
    )
    agent_loop_config_path: str | None = None
    custom_async_server: CustomAsyncServerConfig = Field(default_factory=CustomAsyncServerConfig)
    agent_loop_manager_class: str | None = None
