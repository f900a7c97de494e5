"""``actor_rollout_ref.rollout.*``: how responses are generated (vLLM or Hugging Face)."""

from typing import Any, Literal

from pydantic import Field

from kuberl_api.backend_config.multi_turn import AgentLoopConfig, MultiTurnConfig
from kuberl_api.backend_config.verl_keys import VerlEngineKwargsKeys, VerlRolloutKeys
from kuberl_api.base import ConfigModel


class ValKwargsConfig(ConfigModel):
    top_k: int = -1
    top_p: float = Field(1.0, gt=0, le=1)
    temperature: float = Field(0.0, ge=0)
    n: int = Field(1, gt=0)
    do_sample: bool = False


class EngineKwargsConfig(VerlEngineKwargsKeys):
    vllm: dict[str, Any] = Field(default_factory=dict, description="Passed through to vLLM.")
    sglang: dict[str, Any] = Field(default_factory=dict)


class RolloutConfig(VerlRolloutKeys):
    name: Literal["vllm", "hf", "sglang"] = "vllm"
    mode: Literal["sync", "async"] = "sync"
    temperature: float = Field(1.0, ge=0)
    top_k: int = Field(-1, description="-1 (or 0 for hf) disables top-k.")
    top_p: float = Field(1.0, gt=0, le=1)
    do_sample: bool = True
    n: int = Field(1, gt=0, le=4096, description="Responses sampled per prompt.")
    prompt_length: int | None = Field(None, gt=0, description="Null follows data.")
    response_length: int | None = Field(None, gt=0, description="Null follows data.")
    dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    gpu_memory_utilization: float = Field(0.5, gt=0, le=1)
    ignore_eos: bool = False
    enforce_eager: bool = True
    free_cache_engine: bool = True
    load_format: Literal[
        "dummy", "dummy_dtensor", "dummy_hf", "dummy_megatron", "safetensors", "auto", "hf"
    ] = "dummy"
    layered_summon: bool = False
    tensor_model_parallel_size: int = Field(2, gt=0)
    data_parallel_size: int = Field(1, gt=0)
    expert_parallel_size: int = Field(1, gt=0)
    pipeline_model_parallel_size: int = Field(1, gt=0)
    max_num_batched_tokens: int = Field(8192, gt=0)
    max_model_len: int | None = Field(None, gt=0)
    max_num_seqs: int = Field(1024, gt=0)
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    disable_log_stats: bool = True
    log_prob_micro_batch_size: int | None = Field(
        None, gt=0, description="Deprecated: use log_prob_micro_batch_size_per_gpu."
    )
    log_prob_micro_batch_size_per_gpu: int | None = Field(None, gt=0)
    log_prob_use_dynamic_bsz: bool | None = None
    log_prob_max_token_len_per_gpu: int | None = Field(None, gt=0)
    calculate_log_probs: bool = False
    engine_kwargs: EngineKwargsConfig = Field(default_factory=EngineKwargsConfig)
    val_kwargs: ValKwargsConfig = Field(default_factory=ValKwargsConfig)
    multi_turn: MultiTurnConfig = Field(default_factory=MultiTurnConfig)
    agent: AgentLoopConfig = Field(default_factory=AgentLoopConfig)
