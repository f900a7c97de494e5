"""The run plan's parts: frozen, fully resolved, no optional fields.

Field names are verl's where a verl key decides the value, so ``kuberl keys`` and the plan speak
the same language. "Absent" is spelled as an empty string or list, and a few verl ``null`` s
have a named meaning instead (``max_ckpt_to_keep: 0`` = keep all); each says so below. The two
exceptions are ``actor.loss_scale_factor`` and ``critic.loss_scale_factor`` (see there).
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from kuberl_api.accelerators import DEVICES

Device = Literal[(*DEVICES, "auto")]  # type: ignore[valid-type]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class PlacementPlan(Frozen):
    nnodes: int
    n_gpus_per_node: int
    world_size: int
    device: Device
    """"auto": not written and no worker pool to derive it from; the runtime uses what its
    machine has and logs it. A named accelerator that is not visible is an error there."""
    dp_size: int
    """Data-parallel ranks: world_size / sp_size."""
    sp_size: int
    """Ulysses sequence-parallel degree (actor.ulysses_sequence_parallel_size): SP groups of
    sp_size contiguous ranks; actor, reference and critic all run in this (dp, sp) layout."""
    nccl_timeout: int


class RemoteInputPlan(Frozen):
    url: str
    local_path: str
    """Under input_cache_dir (the path itself for file://): the runtime reads this copy."""


class PathsPlan(Frozen):
    """Absolute paths of a run's outputs."""

    output_dir: str
    """af_output_dir, or the checkpoint directory when there is none; for an af_output_dir URL
    its local staging directory (``kuberl_api.storage.output_location``)."""
    output_url: str
    """af_output_dir when it is a URL the run uploads to (checkpoints through
    ``trainer.checkpoint_mirror``, then the logs and the merged model); empty: a mounted path."""
    checkpoint_dir: str
    logs_dir: str
    hf_export_dir: str
    input_cache_dir: str
    """Where remote models and data are downloaded: ``<output_dir>/cache/inputs``."""
    remote_inputs: list[RemoteInputPlan]
    """Every model/data URL of the run with its local copy. Empty: all inputs are local paths
    or hub ids (read as they are)."""


class CustomClassPlan(Frozen):
    path: str
    """Empty: kuberl's own dataset."""
    name: str


class DataPlan(Frozen):
    tokenizer: str
    train_files: list[str]
    val_files: list[str]
    """Empty: no validation."""
    train_max_samples: int
    val_max_samples: int
    prompt_key: str
    reward_fn_key: str
    max_prompt_length: int
    max_response_length: int
    train_batch_size: int
    gen_batch_size: int
    """Prompts per generation batch: train_batch_size unless DAPO's filter_groups is on."""
    shuffle: bool
    seed: int
    filter_overlong_prompts: bool
    truncation: Literal["error", "left", "right", "middle"]
    trust_remote_code: bool
    return_raw_chat: bool
    apply_chat_template_kwargs: dict[str, Any]
    custom_cls: CustomClassPlan
    image_key: str
    """Column of image prompts' pictures (read only with a vision-language processor)."""
    video_key: str
    """Column of videos: refused when a row has any (not supported yet)."""
    return_multi_modal_inputs: bool
    """Keep each image prompt's processor outputs in memory, else recompute them per batch."""
    mm_processor_kwargs: dict[str, Any]
    """Extra keyword arguments of every processor call (min_pixels, max_pixels, ...)."""


class ModelPlan(Frozen):
    path: str
    override_config: dict[str, Any]
    trust_remote_code: bool
    external_lib: str
    """Empty: none."""
    enable_gradient_checkpointing: bool
    lora_rank: int
    lora_alpha: int
    target_modules: str | list[str]
    exclude_modules: list[str]
    custom_chat_template: str
    """Empty: the tokenizer's own template."""
    lora_adapter_path: str
    """Empty: a fresh adapter."""


class OptimPlan(Frozen):
    lr: float
    lr_warmup_steps: int
    lr_warmup_steps_ratio: float
    lr_scheduler_type: Literal["constant", "cosine", "wsd"]
    min_lr_ratio: float
    num_cycles: float
    weight_decay: float
    betas: list[float]
    optimizer: str
    """A torch.optim class name (validation: the ones verl's build_optimizer can build)."""


class FSDPPlan(Frozen):
    param_offload: bool
    optimizer_offload: bool
    """The optimizer state in host memory between optimizer steps (engine/optim_offload.py);
    false for models that are not trained (reference, reward model)."""
    offload_policy: bool
    reshard_after_forward: bool
    fsdp_size: int
    """Ranks per shard group (HSDP: replicated across groups); -1 (or the world): all ranks.
    Validation: -1 or a divisor of the world size."""
    dtype: str
    """Parameters' compute dtype: mixed_precision.param_dtype when written, else dtype."""
    reduce_dtype: str
    """Gradient reduction dtype (mixed_precision.reduce_dtype; fp32 for frozen models)."""
    seed: int
    model_dtype: str
    """The dtype the module is built and held in (its master weights)."""


class CheckpointPlan(Frozen):
    save_contents: list[str]
    load_contents: list[str]


class PolicyLossPlan(Frozen):
    """The loss mode and the parameters only some modes read (runtime LossModeParams)."""

    loss_mode: str
    clip_cov_ratio: float
    clip_cov_lb: float
    clip_cov_ub: float
    kl_cov_ratio: float
    ppo_kl_coef: float
    tau_pos: float
    """SAPO's gate temperatures: actor.tau_pos/tau_neg (verl reads them from the actor)."""
    tau_neg: float
    dro_beta: float
    """0 when unset (verl's null); validation requires > 0 for loss_mode dro."""


class ActorPlan(Frozen):
    ppo_mini_batch_size: int
    ppo_micro_batch_size_per_gpu: int
    """0 with use_dynamic_bsz: micro batches are cut by token budget instead."""
    use_dynamic_bsz: bool
    ppo_max_token_len_per_gpu: int
    mini_batch_rows_per_rank: int
    """Responses per rank per optimizer step: ppo_mini_batch_size x rollout.n / dp_size."""
    grad_clip: float
    """optim.clip_grad (verl 0.9.1's engine reads it) when written, else actor.grad_clip."""
    clip_ratio: float
    clip_ratio_low: float
    clip_ratio_high: float
    clip_ratio_c: float
    policy_loss: PolicyLossPlan
    loss_agg_mode: str
    loss_scale_factor: float | None
    """The one optional field: null divides by the padded response length at loss time
    (verl's seq-mean-token-sum-norm), a length only the batch knows."""
    entropy_coeff: float
    calculate_entropy: bool
    freeze_vision_tower: bool
    """A vision-language actor's vision encoder is not trained (no gradients, not optimised)."""
    use_kl_loss: bool
    kl_loss_coef: float
    kl_loss_type: str
    ppo_epochs: int
    use_remove_padding: bool
    on_policy_shortcut: bool
    """kuberl extension: no old-log-prob forward; validated to hold only for on-policy updates."""
    activation_offload: bool
    """model.enable_activation_offload: the update's saved activations wait for backward in host
    memory (torch.autograd.graph.save_on_cpu), as verl's activation offload keeps them off the
    accelerator; the same numbers."""
    optim: OptimPlan
    fsdp_config: FSDPPlan
    checkpoint: CheckpointPlan


class RefPlan(Frozen):
    enabled: bool
    """A reference log-prob is needed (KL loss or KL in reward)."""
    separate_model: bool
    """A frozen copy is built; with LoRA the actor with adapters disabled is the reference."""
    log_prob_micro_batch_size_per_gpu: int
    log_prob_use_dynamic_bsz: bool
    log_prob_max_token_len_per_gpu: int
    fsdp_config: FSDPPlan


class SamplingPlan(Frozen):
    temperature: float
    top_k: int
    top_p: float
    do_sample: bool
    n: int


class EngineKwargsPlan(Frozen):
    vllm: dict[str, Any]


class MultiTurnPlan(Frozen):
    """``rollout.multi_turn.*`` and ``rollout.agent.default_agent_loop`` (verl's defaults)."""

    enable: bool = False
    max_assistant_turns: int = 0
    """0: no limit (verl's null)."""
    max_user_turns: int = 0
    tool_config_path: str = ""
    function_tool_path: str = ""
    max_parallel_calls: int = 1
    max_tool_response_length: int = 256
    tool_response_truncate_side: Literal["left", "right", "middle"] = "middle"
    tokenization_sanity_check_mode: Literal["strict", "ignore_strippable", "disable"] = "strict"
    default_agent_loop: Literal["single_turn_agent", "tool_agent"] = "single_turn_agent"
    tool_timeout: float = 60.0
    """Seconds a tool call may run (kuberl's ``multi_turn.tool_timeout``)."""


class RolloutPlan(Frozen):
    name: Literal["vllm", "hf", "sglang"]
    temperature: float
    top_k: int
    top_p: float
    do_sample: bool
    n: int
    ignore_eos: bool
    prompt_length: int
    response_length: int
    dtype: str
    gpu_memory_utilization: float
    enforce_eager: bool
    free_cache_engine: bool
    load_format: str
    tensor_model_parallel_size: int
    max_num_batched_tokens: int
    max_model_len: int
    """verl's null: prompt_length + response_length."""
    max_num_seqs: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    disable_log_stats: bool
    log_prob_micro_batch_size_per_gpu: int
    log_prob_use_dynamic_bsz: bool
    log_prob_max_token_len_per_gpu: int
    engine_kwargs: EngineKwargsPlan
    val_kwargs: SamplingPlan
    multi_turn: MultiTurnPlan = MultiTurnPlan()


class CriticModelPlan(Frozen):
    path: str
    override_config: dict[str, Any]
    external_lib: str
    trust_remote_code: bool
    enable_gradient_checkpointing: bool
    use_remove_padding: bool
    lora_rank: int
    lora_alpha: int
    target_modules: str | list[str]
    fsdp_config: FSDPPlan


class CriticPlan(Frozen):
    enable: bool
    model: CriticModelPlan
    optim: OptimPlan
    ppo_mini_batch_size: int
    ppo_micro_batch_size_per_gpu: int
    forward_micro_batch_size_per_gpu: int
    use_dynamic_bsz: bool
    ppo_max_token_len_per_gpu: int
    forward_max_token_len_per_gpu: int
    ppo_epochs: int
    grad_clip: float
    """optim.clip_grad when written, else critic.grad_clip."""
    cliprange_value: float
    loss_agg_mode: str
    loss_scale_factor: float | None
    """Optional like the actor's (null: the padded response length at loss time); it follows
    the actor's when not written."""
    checkpoint: CheckpointPlan


class RewardModelPlan(Frozen):
    enable: bool
    path: str
    trust_remote_code: bool
    micro_batch_size_per_gpu: int
    """0: the rank's whole shard in one forward."""
    input_tokenizer: str
    """Empty: the actor's tokenizer, ids fed as they are; else responses are decoded and
    re-tokenised with this one."""
    fsdp_config: FSDPPlan


class OverlongBufferPlan(Frozen):
    """reward_model.reward_kwargs.overlong_buffer_cfg (the dapo manager's penalty)."""

    enable: bool
    len: int
    penalty_factor: float
    log: bool


BUILTIN_REWARD_KWARGS = ("lenient",)
"""What custom_reward_function.reward_kwargs may hold without a path: the built-in scorers' one
option, kuberl's forgiving answer comparison instead of verl's exact one (a bool, off by default).
"""


class RewardFunctionPlan(Frozen):
    path: str
    """Empty: the built-in scorers chosen by data source."""
    name: str
    reward_kwargs: dict[str, Any]
    """custom_reward_function.reward_kwargs: the scoring function's own arguments."""
    reward_manager: Literal["naive", "batch", "dapo", "prime", "gdpo"]
    overlong_buffer: OverlongBufferPlan
    """Off unless reward_manager is dapo (validation refuses it on with another manager)."""
    max_resp_len: int
    """reward_model.reward_kwargs.max_resp_len; 0 when not written (the buffer is off then)."""


class KLControlPlan(Frozen):
    type: Literal["fixed", "adaptive"]
    kl_coef: float
    horizon: int
    target_kl: float


class RollRLVRPlan(Frozen):
    """ROLL's RLVR options (kuberl extension, H-numbers; runtime algorithms/roll_rlvr.py), as
    applied: the thresholds are 0 and 1 without difficulty_mask, and with grpo any option on
    makes the score normalisation group/group (ROLL's rule; plan/build.py ``_roll_rlvr``)."""

    reward_clip: float
    """0: no clip."""
    advantage_clip: float
    """0: no clip."""
    norm_mean_type: Literal["batch", "group", "none"]
    norm_std_type: Literal["batch", "group", "none"]
    max_len_mask: bool
    difficulty_mask: bool
    difficulty_low_threshold: float
    difficulty_high_threshold: float


class FilterGroupsPlan(Frozen):
    """DAPO dynamic sampling (runtime trainer/dynamic_sampling.py); off: metric empty, 0."""

    enable: bool
    metric: str
    """reward | seq_reward | seq_final_reward (summed scores) or a reward extra-info key."""
    max_num_gen_batches: int
    """Generation batches a step may use; 0 or less: no limit."""


class AlgorithmPlan(Frozen):
    gamma: float
    lam: float
    adv_estimator: str
    norm_adv_by_std_in_grpo: bool
    use_kl_in_reward: bool
    kl_penalty: str
    kl_ctrl: KLControlPlan
    roll_rlvr: RollRLVRPlan
    filter_groups: FilterGroupsPlan


class TrainerPlan(Frozen):
    total_epochs: int
    total_training_steps: int
    """0: total_epochs x steps per epoch (the dataset decides)."""
    project_name: str
    experiment_name: str
    loggers: list[str]
    save_freq: int
    test_freq: int
    val_before_train: bool
    val_only: bool
    critic_warmup: int
    resume_mode: Literal["auto", "disable", "resume_path"]
    resume_from_path: str
    max_ckpt_to_keep: int
    """0: keep every checkpoint."""
    checkpoint_mirror: str
    """trainer.default_hdfs_dir: a URL every checkpoint is also uploaded to (and resumed from
    when it holds a newer complete step than the local disk); empty: none."""
    seed: int
    balance_batch: bool
