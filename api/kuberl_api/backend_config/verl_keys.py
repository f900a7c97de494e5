"""verl 0.9.1 keys kuberl accepts so that verl's own configs read as written.

Each mixin holds the keys of one node of verl 0.9.1's tree
(``verl/trainer/config/_generated_ppo_trainer.yaml``) that kuberl does not implement, with
verl's default; the node's model inherits it. What each key does in kuberl (refused when set
to anything but the default, or no effect) is in ``kuberl_api/keys/verl_keys.py``; subtrees
with an on/off switch are refused when switched on (``validation/rules_switches.py``).
Free-form subtrees are single ``dict`` leaves.
"""

from typing import Any

from pydantic import Field

from kuberl_api.base import ConfigModel

Subtree = dict[str, Any] | None


class VerlOptimKeys(ConfigModel):
    optimizer_impl: str = "torch.optim"
    zero_indexed_step: bool = True
    override_optimizer_config: Subtree = None


class VerlFSDPKeys(ConfigModel):
    full_determinism: bool = False
    ulysses_sequence_parallel_size: int = Field(1, gt=0)
    entropy_from_logits_with_chunking: bool = False
    entropy_from_logits_chunk_size: int = 2048
    use_torch_compile: bool = True
    entropy_checkpointing: bool = False
    use_no_sync_for_gradient_accumulation: bool = False
    pad_to_length: bool = False
    pad_to_length_bucket: int = 1024
    strategy: str = "fsdp"
    qat: Subtree = None
    turbo_config: Subtree = None


class VerlCheckpointKeys(ConfigModel):
    async_save: bool = False
    strict: bool = True


class VerlActorKeys(ConfigModel):
    rollout_n: int = Field(1, gt=0, description="verl fills it from rollout.n.")
    freeze_vision_tower: bool = False
    calculate_sum_pi_squared: bool = False
    use_prefix_grouper: bool = False
    profiler: Subtree = None
    qat: Subtree = None
    entropy_from_logits_chunk_size: int = 2048
    pad_to_length: bool = False


class VerlRefKeys(ConfigModel):
    rollout_n: int = Field(1, gt=0, description="verl fills it from rollout.n.")
    profiler: Subtree = None
    entropy_from_logits_chunk_size: int = 2048
    pad_to_length: bool = False


class VerlEngineKwargsKeys(ConfigModel):
    trtllm: dict[str, Any] = Field(default_factory=dict)


class VerlRolloutKeys(ConfigModel):
    nnodes: int = Field(0, ge=0, description="0: colocated with the actor.")
    n_gpus_per_node: int | None = Field(None, description="verl fills it from the trainer.")
    full_determinism: bool = False
    seed: int = 42
    cudagraph_capture_sizes: list[int] | None = None
    logprobs_mode: str = "processed_logprobs"
    scheduling_policy: str = "fcfs"
    over_sample_rate: float = 0
    multi_stage_wake_up: bool = False
    router_config_path: str | None = None
    checkpoint_engine: Subtree = None
    trace: Subtree = None
    skip_tokenizer_init: bool = True
    enable_rollout_routing_replay: bool = False
    moe_load_balance_metrics_interval: int = 0
    profiler: Subtree = None
    prometheus: Subtree = None
    quantization: str | None = None
    quantization_config_file: str | None = None
    mtp: Subtree = None
    qat: Subtree = None
    disaggregation: Subtree = None


class VerlModelKeys(ConfigModel):
    use_shm: bool = False
    fused_kernel_options: Subtree = None
    tiled_mlp: Subtree = None
    mtp: Subtree = None
    lora: Subtree = None


class VerlCriticModelKeys(VerlModelKeys):
    hf_config_path: str | None = None
    custom_chat_template: str | None = None
    enable_activation_offload: bool = False
    exclude_modules: str | list[str] | None = None
    lora_adapter_path: str | None = None
    use_liger: bool = False
    use_fused_kernels: bool = False


class VerlDataKeys(ConfigModel):
    tool_config_path: str | None = None
    function_tool_path: str | None = None
    image_patch_size: int = 14
    audio_key: str = "audios"
    return_multi_modal_inputs: bool = True
    mm_processor_kwargs: dict[str, Any] = Field(default_factory=dict)


class VerlCriticKeys(ConfigModel):
    fsdp: Subtree = None
    rollout_n: int = Field(1, gt=0, description="verl fills it from rollout.n.")
    data_loader_seed: int = 42
    profiler: Subtree = None


class VerlRewardModelKeys(ConfigModel):
    num_workers: int | None = None
    enable_resource_pool: bool | None = None
    n_gpus_per_node: int | None = None
    nnodes: int | None = None
    reward_loop_source: str | None = None
    reward_loop_module_path: str | None = None
    reward_loop_class_name: str | None = None
    rollout: Subtree = None


class VerlTrainerKeys(ConfigModel):
    esi_redundant_time: int = 0
    checkpoint_callback_class: str | None = None
    ray_wait_register_center_timeout: int = 300
    use_v1: bool = True
    v1: Subtree = None


class VerlRootKeys(ConfigModel):
    sandbox_fusion: Subtree = None
    reward: Subtree = None
    distillation: Subtree = None
    transfer_queue: Subtree = None
    global_profiler: Subtree = None
    skip: Subtree = None
