"""The generative reward model's engine (an LLM judge served by vLLM), as the plan holds it.

verl 0.9.1 serves a reward model through its reward loop when ``reward_model.enable`` is set
with ``reward_model.rollout.name``; with ``custom_reward_function.path`` beside it the model is
generative: the user's function builds the judge prompt, posts it to the served model
(``reward_router_address``, an OpenAI ``/v1/chat/completions`` endpoint) and parses the score.
kuberl serves the judge from a vLLM engine inside each training rank (colocated, as verl's
default resource pool): its engine settings are ``reward_model.rollout.*`` with verl's
``RolloutConfig`` defaults for a reward model (``trainer/config/reward/reward.yaml``).
"""

from typing import Any, Literal

from kuberl_api.plan.sections import Frozen

# verl 0.9.1's reward.yaml defaults for reward_model.rollout (the ones the judge engine reads).
JUDGE_DEFAULTS: dict[str, Any] = {
    "dtype": "bfloat16",
    "gpu_memory_utilization": 0.5,
    "enforce_eager": True,
    "free_cache_engine": True,
    "tensor_model_parallel_size": 2,
    "max_num_batched_tokens": 8192,
    "max_model_len": None,
    "max_num_seqs": 1024,
    "enable_chunked_prefill": True,
    "enable_prefix_caching": True,
    "disable_log_stats": True,
    "load_format": "auto",
    "prompt_length": 2048,
    "response_length": 2048,
    "engine_kwargs": {},
}


class JudgePlan(Frozen):
    """One judge engine per training rank (``placement: colocated``). Without a generative
    reward model ``enable`` is false and the rest holds verl's defaults (read by nothing)."""

    enable: bool
    name: Literal["vllm"]
    model_path: str
    placement: Literal["colocated"]
    dtype: str
    gpu_memory_utilization: float
    enforce_eager: bool
    free_cache_engine: bool
    """Sleep between reward passes where the platform has sleep mode (GPU); on CPU vLLM has
    none and the judge stays resident."""
    tensor_model_parallel_size: int
    max_num_batched_tokens: int
    max_model_len: int
    """max_model_len, else prompt_length + response_length."""
    max_num_seqs: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    disable_log_stats: bool
    load_format: str
    engine_kwargs: dict[str, Any]
    """reward_model.rollout.engine_kwargs.vllm: passed to the engine as they are."""


def judge_section(rollout: dict[str, Any] | None, model_path: str, enable: bool) -> JudgePlan:
    """``reward_model.rollout`` (a validated generative RM's) with verl's defaults filled;
    disabled: verl's defaults alone."""
    if not enable:
        rollout, model_path = None, ""
    values = {**JUDGE_DEFAULTS, **{k: v for k, v in (rollout or {}).items() if v is not None}}
    max_len = values["max_model_len"] or values["prompt_length"] + values["response_length"]
    engine_kwargs = values["engine_kwargs"] or {}
    return JudgePlan(
        enable=enable,
        name="vllm",
        model_path=model_path,
        placement="colocated",
        dtype=str(values["dtype"]),
        gpu_memory_utilization=float(values["gpu_memory_utilization"]),
        enforce_eager=bool(values["enforce_eager"]),
        free_cache_engine=bool(values["free_cache_engine"]),
        tensor_model_parallel_size=int(values["tensor_model_parallel_size"]),
        max_num_batched_tokens=int(values["max_num_batched_tokens"]),
        max_model_len=int(max_len),
        max_num_seqs=int(values["max_num_seqs"]),
        enable_chunked_prefill=bool(values["enable_chunked_prefill"]),
        enable_prefix_caching=bool(values["enable_prefix_caching"]),
        disable_log_stats=bool(values["disable_log_stats"]),
        load_format=str(values["load_format"]),
        engine_kwargs=dict(engine_kwargs.get("vllm") or {}),
    )


def is_generative(enable: bool, function_path: str | None, rollout: dict[str, Any] | None) -> bool:
    """verl 0.9.1's rule: a served reward model (``rollout.name`` set) whose scores come from
    ``custom_reward_function`` (the function queries the model) is generative."""
    return bool(enable and function_path and (rollout or {}).get("name"))
