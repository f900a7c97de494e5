"""ROLL's pipeline config as typed models: the keys ROLL documents, with ROLL's names.

Only keys kuberl can translate (exactly or approximately) are fields here; keys ROLL knows but
kuberl cannot use are taken out before validation by ``roll.unsupported`` so they get a message
that says why, and anything else is an unknown key with a did-you-mean hint.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RollDtype = Literal["fp32", "bf16", "fp16"]
TrainStrategy = Literal["megatron_train", "deepspeed_train", "fsdp2_train"]
InferStrategy = Literal[
    "vllm", "sglang", "hf_infer", "megatron_infer", "deepspeed_infer", "fsdp2_infer"
]
TorchDtype = Literal["bf16", "fp16", "fp32", "bfloat16", "float16", "float32"]
"""The dtype names ROLL's FSDP2 strategy parses (``_parse_dtype``)."""
DeviceMapping = list[int] | str
"""A list of global device ranks, or ROLL's string form such as ``list(range(0,8))``."""


class RollModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ModelArgs(RollModel):
    model_name_or_path: str | None = Field(None, description="Null uses pretrain.")
    dtype: RollDtype | None = None
    disable_gradient_checkpointing: bool = False
    attn_implementation: Literal["fa2", "sdpa", "eager"] | None = None
    flash_attn: Literal["fa2", "sdpa", "eager"] | None = Field(None, description="Older name.")
    model_type: Literal["causal_lm"] | None = None
    freeze_module_prefix: str | list[str] | None = Field(
        None, description="Comma-separated parameter-name prefixes that get no gradients."
    )
    ulysses_size: int | None = Field(None, gt=0, description="FSDP2: Ulysses SP group size.")
    lora_rank: int | None = Field(None, ge=0)
    lora_alpha: int | None = Field(None, gt=0)
    lora_target: str | list[str] | None = None


class TrainingArgs(RollModel):
    learning_rate: float | None = Field(None, gt=0)
    weight_decay: float | None = Field(None, ge=0)
    per_device_train_batch_size: int = Field(1, gt=0)
    gradient_accumulation_steps: int = Field(1, gt=0)
    warmup_steps: int | None = Field(None, ge=0)
    warmup_ratio: float | None = Field(None, ge=0, le=1)
    lr_scheduler_type: Literal["constant", "constant_with_warmup", "cosine"] | None = None
    max_grad_norm: float | None = Field(None, gt=0)
    num_train_epochs: int | float | None = Field(None, gt=0)


class DataArgs(RollModel):
    template: str | None = Field(None, description="native: the tokenizer's chat template.")
    file_name: str | list[str] | None = None
    prompt: str | None = Field(None, description="Column holding a plain-text prompt.")
    messages: str | None = Field(None, description="Column holding chat messages.")
    dataset_dir: str | None = None
    domain_interleave_probs: dict[str, float] | None = None


class GeneratingArgs(RollModel):
    max_new_tokens: int | None = Field(None, gt=0)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = None
    do_sample: bool | None = None
    num_beams: int | None = Field(None, gt=0)
    num_return_sequences: int | None = Field(None, gt=0)


class ZeroOffload(RollModel):
    device: Literal["cpu", "none", "nvme"] = "none"
    pin_memory: bool | str | None = None


class ZeroOptimization(RollModel):
    model_config = ConfigDict(extra="allow", strict=True)
    stage: int = Field(0, ge=0, le=3)
    offload_optimizer: ZeroOffload | None = None
    offload_param: ZeroOffload | None = None


class StrategyConfig(RollModel):
    # Megatron-Core (train and infer).
    tensor_model_parallel_size: int | None = Field(None, gt=0)
    pipeline_model_parallel_size: int | None = Field(None, gt=0)
    virtual_pipeline_model_parallel_size: int | None = Field(None, gt=0)
    expert_model_parallel_size: int | None = Field(None, gt=0)
    context_parallel_size: int | None = Field(None, gt=0)
    sequence_parallel: bool | None = None
    use_distributed_optimizer: bool | None = None
    # vLLM.
    tensor_parallel_size: int | None = Field(None, gt=0)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    block_size: int | None = Field(None, gt=0)
    max_model_len: int | None = Field(None, gt=0)
    load_format: str | None = None
    enforce_eager: bool | None = None
    max_num_batched_tokens: int | None = Field(None, gt=0)
    max_num_seqs: int | None = Field(None, gt=0)
    enable_prefix_caching: bool | None = None
    # SGLang.
    mem_fraction_static: float | None = Field(None, gt=0, le=1)
    tp_size: int | None = Field(None, gt=0)
    # vLLM options kuberl's engine decides itself (named in a warning).
    sleep_level: int | None = None
    optimization_level: int | None = None
    disable_log_stats: bool | None = None
    # FSDP2 (fsdp2_train / fsdp2_infer), read by ROLL's fsdp2_strategy.py.
    fsdp_size: int | None = Field(None, gt=0)
    param_dtype: TorchDtype | None = None
    reduce_dtype: TorchDtype | None = None
    reshard_after_forward: bool | None = None
    offload_policy: bool | None = None
    wrap_policy: dict[str, Any] | None = None
    use_batched_model_update: bool | None = None
    apply_expert_patch: bool | None = None
    apply_tiled_mlp: bool | None = None
    tiled_num_shards: int | None = Field(None, gt=0)
    efsdp_size: int | None = Field(None, gt=0)
    ep_size: int | None = Field(None, gt=0)
    moe_use_grouped_mm: bool | None = None
    # DeepSpeed: the ZeRO section decides; the rest of a DeepSpeed JSON is its own business.
    zero_optimization: ZeroOptimization | None = None
    bf16: dict[str, Any] | bool | None = Field(
        None, description="DeepSpeed: a section; Megatron: a flag."
    )
    fp16: dict[str, Any] | bool | None = Field(
        None, description="DeepSpeed: a section; Megatron: a flag."
    )
    train_batch_size: int | str | None = None
    train_micro_batch_size_per_gpu: int | str | None = None
    gradient_accumulation_steps: int | str | None = None
    gradient_clipping: float | str | None = None
    zero_allow_untested_optimizer: bool | None = None
    steps_per_print: int | None = None
    wall_clock_breakdown: bool | None = None


class StrategyArgs(RollModel):
    strategy_name: TrainStrategy | InferStrategy
    strategy_config: StrategyConfig | None = None


class WorkerConfig(RollModel):
    model_args: ModelArgs = Field(default_factory=ModelArgs)
    training_args: TrainingArgs | None = None
    data_args: DataArgs | None = None
    generating_args: GeneratingArgs | None = None
    strategy_args: StrategyArgs | None = None
    device_mapping: DeviceMapping | None = None
    infer_batch_size: int | None = Field(None, gt=0)
    num_gpus_per_worker: int | None = Field(None, gt=0)


class ValidationConfig(RollModel):
    data_args: DataArgs | None = None
    generating_args: GeneratingArgs | None = None
    eval_steps: int | None = Field(None, gt=0)


class RewardWorker(RollModel):
    """A ROLL reward worker: ``roll.rewards`` decides from ``worker_cls`` whether kuberl can
    score its rows; the model, strategy and generation settings of a worker kuberl does not run
    are kept only to be named in that decision."""

    worker_cls: str
    tag_included: list[str] | None = None
    model_args: dict[str, Any] | None = None
    data_args: DataArgs | None = None
    generating_args: dict[str, Any] | None = None
    strategy_args: dict[str, Any] | None = None
    device_mapping: DeviceMapping | None = None
    world_size: int | None = Field(None, gt=0)
    infer_batch_size: int | None = Field(None, gt=0)
    reward_type: str | None = Field(None, description="Rule workers: soft / hard scoring.")
    response_length_penalty_coef: float | None = None
    use_local: bool | None = Field(None, description="code_sandbox: run tests locally.")
    judge_prompt: str | None = None
    judge_model_type: str | None = Field(None, description="api, inference or cluster.")


class RollConfig(RollModel):
    exp_name: str | None = None
    seed: int | None = None
    output_dir: str | None = None
    num_gpus_per_node: int = Field(8, gt=0, le=64)
    max_steps: int | None = Field(None, gt=0)
    save_steps: int | None = Field(None, gt=0)
    logging_steps: int | None = Field(None, gt=0)
    eval_steps: int | None = Field(None, gt=0)
    resume_from_checkpoint: bool | str | None = None
    track_with: str | None = Field(None, description="stdout, tensorboard, wandb or swanlab.")

    rollout_batch_size: int = Field(gt=0, description="Prompts per step.")
    num_return_sequences_in_group: int = Field(1, gt=0, description="Responses per prompt.")
    prompt_length: int = Field(gt=0)
    response_length: int = Field(gt=0)
    val_batch_size: int | None = Field(None, gt=0)

    pretrain: str | None = Field(None, description="Actor and reference weights.")
    reward_pretrain: str | None = Field(None, description="Critic weights.")

    # ROLL's PPOConfig defaults, which differ from verl's: an absent key means ROLL's value.
    adv_estimator: Literal["gae", "grpo", "reinforce"] = "gae"
    ppo_epochs: int = Field(1, gt=0)
    max_grad_norm: float = Field(1.0, gt=0)
    gamma: float = Field(1.0, ge=0, le=1)
    lambd: float = Field(0.95, ge=0, le=1)
    pg_clip: float = Field(0.2, gt=0, lt=1)
    use_pg_clip_range: bool = False
    pg_clip_low: float = Field(0.2, gt=0, lt=1)
    pg_clip_high: float = Field(0.2, gt=0)
    dual_clip_loss: bool = False
    value_clip: float | None = Field(None, gt=0)
    whiten_advantages: bool = False
    kl_penalty: Literal["kl", "abs", "mse", "full"] = "kl"
    init_kl_coef: float = Field(0.2, ge=0)
    target_kl: float | None = Field(None, gt=0, description="Set: adaptive KL control.")
    kl_horizon: int = Field(10000, gt=0)
    add_token_level_kl: bool = False
    use_kl_loss: bool = False
    kl_loss_coef: float = Field(0.0, ge=0)
    entropy_loss_coef: float = 0.0
    loss_agg_mode: Literal[
        "token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"
    ] = "seq-mean-token-mean"
    critic_warmup: int = Field(0, ge=0)
    enable_reference: bool = False
    # RLVR reward/advantage options (RLVRConfig); kuberl's algorithm.* keys of the same names.
    reward_clip: float | None = Field(None, ge=0, description="0 or null: off (ROLL).")
    advantage_clip: float | None = Field(None, gt=0)
    norm_mean_type: Literal["batch", "group", "running"] | None = None
    norm_std_type: Literal["batch", "group", "running"] | None = None
    max_len_mask: bool = False
    difficulty_mask: bool = False
    difficulty_low_threshold: float = 0.0
    difficulty_high_threshold: float = 1.0

    validation: ValidationConfig | None = None
    rewards: dict[str, RewardWorker] | None = None

    actor_train: WorkerConfig
    actor_infer: WorkerConfig
    reference: WorkerConfig | None = None
    critic: WorkerConfig | None = None
