"""Fates of the verl 0.9.1 keys kuberl accepts only so verl's configs read as written.

The keys are declared in ``backend_config/verl_keys.py`` with verl's defaults. Apart from the
multimodal ones (``data.return_multi_modal_inputs``, ``data.mm_processor_kwargs``,
``actor.freeze_vision_tower``: issue 16) none is implemented: each is refused when set to
anything but verl's default, or has no effect by nature (profilers, tracing, mirrors verl fills
from another key by interpolation). verl 0.9's own spellings of keys kuberl reads
(``fsdp_config.ulysses_sequence_parallel_size``, ``rollout.cudagraph_capture_sizes``) are folded
into them by ``validation/spellings.py``. Feature
subtrees with an on/off switch are listed as no effect while off; switching one on is refused
by ``validation/rules_switches.py`` (path, value, fix).
"""

from kuberl_api.keys.actor import SAME_SP
from kuberl_api.keys.entry import KeyEntry, honoured, no_effect, refused
from kuberl_api.keys.where import DATASET, MODEL_BUILDER

AR = "actor_rollout_ref."
FSDP_PARENTS = [
    AR + "actor.fsdp_config.",
    AR + "ref.fsdp_config.",
    "critic.model.fsdp_config.",
    "reward_model.model.fsdp_config.",
]
NOT_YET = "not supported by kuberl yet; remove it or leave verl's default"
SWITCHED = "inert while its switch is off (verl's default); switching it on is refused"
PROFILER = "profiling only; kuberl has no profiler hooks"
PREFIX_SHARED = (
    "a speed-up with the same log-probs and gradients: kuberl's padded forwards run each "
    "group's shared prompt once (engine/shared_prefix.py) in every forward-only pass and in "
    "the update unless the model checkpoints activations; packed (remove-padding) forwards "
    "run each row whole"
)
ACTOR_SP = AR + "actor.ulysses_sequence_parallel_size"
CRITIC_SAME_SP = (
    "the critic runs in the actor's (dp, sp) layout: leave it at 1 or set it to " + ACTOR_SP
)
SPELLINGS = "api/kuberl_api/validation/spellings.py"
MIRROR = "verl fills it from {} by interpolation; kuberl reads that key"


def _fsdp_keys(parent: str) -> list[KeyEntry]:
    owner = parent.removesuffix("fsdp_config.").removesuffix("model.")
    return [
        refused(parent + "full_determinism", NOT_YET),
        _engine_sp(parent, owner),
        no_effect(
            parent + "entropy_from_logits_with_chunking",
            MIRROR.format(owner + "entropy_from_logits_with_chunking"),
        ),
        no_effect(
            parent + "entropy_from_logits_chunk_size", "memory only; kuberl chunks its own way"
        ),
        no_effect(parent + "use_torch_compile", "a speed-up of the entropy helper; same numbers"),
        no_effect(parent + "entropy_checkpointing", MIRROR.format(owner + "entropy_checkpointing")),
        no_effect(parent + "use_no_sync_for_gradient_accumulation", "FSDP1 communication only"),
        no_effect(parent + "pad_to_length", MIRROR.format(owner + "pad_to_length")),
        no_effect(parent + "pad_to_length_bucket", "used only with pad_to_length (refused)"),
        no_effect(parent + "strategy", MIRROR.format(owner + "strategy")),
        no_effect(parent + "qat", SWITCHED),
        no_effect(parent + "turbo_config", "verl's VeOmni engine only"),
    ]


def _engine_sp(parent: str, owner: str) -> KeyEntry:
    """verl 0.9's own spelling of the Ulysses degree: folded into the owner's key
    (validation/spellings.py), except the reward model's, which verl fills from its owner."""
    key = parent + "ulysses_sequence_parallel_size"
    if owner.startswith("reward_model"):
        return no_effect(key, MIRROR.format(owner + "ulysses_sequence_parallel_size"))
    if owner == AR + "actor.":
        return honoured(key, SPELLINGS)
    # The owner's own refusal, which the folded value meets (validation/spellings.py).
    fix = SAME_SP if owner.startswith(AR) else CRITIC_SAME_SP
    return refused(key, fix, allowed=(1, None), same_as=ACTOR_SP)


def _optim_keys(parent: str) -> list[KeyEntry]:
    return [
        refused(
            parent + "optimizer_impl",
            "kuberl builds optim.optimizer from torch.optim (AdamW, Adam, Adamax, NAdam, RAdam, "
            "SGD, Adagrad, Adadelta, RMSprop); remove it or write torch.optim",
            allowed=("torch.optim", None),
        ),
        refused(parent + "zero_indexed_step", NOT_YET),
        refused(parent + "override_optimizer_config", NOT_YET),
    ]


def _model_keys(parent: str) -> list[KeyEntry]:
    return [
        no_effect(parent + "use_shm", "loading speed only (shared-memory copy of the weights)"),
        no_effect(parent + "fused_kernel_options", "options of use_fused_kernels (no effect)"),
        no_effect(parent + "tiled_mlp", SWITCHED),
        no_effect(parent + "mtp", SWITCHED),
        no_effect(parent + "lora", SWITCHED + " (lora.rank > 0: use lora_rank)"),
    ]


def _checkpoint_keys(parent: str) -> list[KeyEntry]:
    return [
        refused(
            parent + "async_save", "asynchronous checkpoint saving is not supported; remove it"
        ),
        refused(parent + "strict", NOT_YET),
    ]


KEYS: list[KeyEntry] = [
    no_effect("sandbox_fusion", SWITCHED),
    no_effect(
        "reward",
        "verl's current spelling: folded key by key into reward_model.*, "
        "custom_reward_function.* and sandbox_fusion.* (validation/spellings.py)",
    ),
    no_effect("distillation", SWITCHED),
    no_effect("transfer_queue", SWITCHED),
    no_effect("global_profiler", PROFILER),
    no_effect("skip", SWITCHED),
    no_effect("data.tool_config_path", MIRROR.format("rollout.multi_turn.tool_config_path")),
    no_effect("data.function_tool_path", MIRROR.format("rollout.multi_turn.function_tool_path")),
    refused(
        "data.image_patch_size",
        "images are resized by the model processor's own patch size (14 for Qwen2.5-VL); "
        "remove it, or set the processor's min_pixels/max_pixels in data.mm_processor_kwargs",
    ),
    no_effect("data.audio_key", "audio prompts are not read; rows are text or image prompts"),
    honoured("data.return_multi_modal_inputs", DATASET),
    honoured("data.mm_processor_kwargs", DATASET),
    *_model_keys(AR + "model."),
    no_effect(AR + "actor.rollout_n", MIRROR.format("rollout.n")),
    honoured(AR + "actor.freeze_vision_tower", MODEL_BUILDER),
    refused(AR + "actor.calculate_sum_pi_squared", NOT_YET),
    no_effect(AR + "actor.use_prefix_grouper", PREFIX_SHARED),
    no_effect(AR + "actor.profiler", PROFILER),
    no_effect(AR + "actor.qat", SWITCHED),
    no_effect(
        AR + "actor.entropy_from_logits_chunk_size", "memory only; kuberl chunks its own way"
    ),
    refused(AR + "actor.pad_to_length", NOT_YET),
    *_optim_keys(AR + "actor.optim."),
    *[entry for parent in FSDP_PARENTS for entry in _fsdp_keys(parent)],
    *_checkpoint_keys(AR + "actor.checkpoint."),
    no_effect(AR + "ref.rollout_n", MIRROR.format("rollout.n")),
    no_effect(AR + "ref.profiler", PROFILER),
    no_effect(AR + "ref.entropy_from_logits_chunk_size", "memory only; kuberl chunks its own way"),
    no_effect(AR + "ref.pad_to_length", MIRROR.format("actor.pad_to_length")),
    refused(AR + "rollout.nnodes", "a standalone rollout pool is not supported; remove it or 0"),
    no_effect(AR + "rollout.n_gpus_per_node", MIRROR.format("trainer.n_gpus_per_node")),
    refused(AR + "rollout.full_determinism", NOT_YET),
    refused(AR + "rollout.seed", NOT_YET),
    honoured(AR + "rollout.cudagraph_capture_sizes", SPELLINGS),
    refused(AR + "rollout.logprobs_mode", NOT_YET),
    refused(AR + "rollout.scheduling_policy", NOT_YET),
    refused(AR + "rollout.over_sample_rate", NOT_YET),
    no_effect(AR + "rollout.multi_stage_wake_up", "memory timing of vLLM wake-up only"),
    refused(AR + "rollout.router_config_path", NOT_YET),
    no_effect(AR + "rollout.checkpoint_engine", SWITCHED + " (backend naive)"),
    no_effect(AR + "rollout.trace", "rollout tracing backends only"),
    no_effect(AR + "rollout.skip_tokenizer_init", "vLLM start-up detail; kuberl passes token ids"),
    refused(AR + "rollout.enable_rollout_routing_replay", NOT_YET),
    no_effect(AR + "rollout.moe_load_balance_metrics_interval", "a metric only"),
    no_effect(AR + "rollout.profiler", PROFILER),
    no_effect(AR + "rollout.prometheus", SWITCHED + " (kuberl serves its own /metrics)"),
    refused(AR + "rollout.quantization", NOT_YET),
    refused(AR + "rollout.quantization_config_file", NOT_YET),
    no_effect(AR + "rollout.mtp", MIRROR.format("model.mtp (refused when on)")),
    no_effect(AR + "rollout.qat", MIRROR.format("actor.fsdp_config.qat (refused when on)")),
    no_effect(AR + "rollout.disaggregation", SWITCHED),
    no_effect(
        AR + "rollout.engine_kwargs.trtllm",
        "read by a TensorRT-LLM engine only; kuberl generates with vLLM or HF (rollout.name)",
    ),
    no_effect("critic.fsdp", "verl's new-engine copy; kuberl reads critic.model.fsdp_config"),
    no_effect("critic.rollout_n", MIRROR.format("rollout.n")),
    no_effect("critic.data_loader_seed", "verl's FSDP critic ignores it too (new engine only)"),
    no_effect("critic.profiler", PROFILER),
    *_optim_keys("critic.optim."),
    *_model_keys("critic.model."),
    refused("critic.model.hf_config_path", "kuberl reads the config from critic.model.path"),
    refused("critic.model.custom_chat_template", "not supported for the critic; remove it"),
    refused("critic.model.enable_activation_offload", "activation offload is not supported"),
    refused("critic.model.exclude_modules", "not supported for the critic; remove it"),
    refused("critic.model.lora_adapter_path", "not supported for the critic; remove it"),
    refused("critic.model.use_liger", "Liger kernels are not supported; remove it"),
    no_effect("critic.model.use_fused_kernels", "the critic's value head has no vocabulary"),
    *_checkpoint_keys("critic.checkpoint."),
    *[
        refused(
            "reward_model." + key,
            "kuberl runs the reward model inside the training ranks, without verl's reward-loop "
            "workers and pools; remove it",
        )
        for key in (
            "num_workers",
            "enable_resource_pool",
            "n_gpus_per_node",
            "nnodes",
            "reward_loop_source",
            "reward_loop_module_path",
            "reward_loop_class_name",
        )
    ],
    no_effect(
        "reward_model.rollout",
        "verl serves the reward model with this engine; kuberl runs a sequence-classification "
        "model itself (FSDP). For a generative reward model (custom_reward_function.path set) "
        "it configures the judge's vLLM engine instead (plan/reward_judge.py)",
    ),
    no_effect("trainer.esi_redundant_time", "Ascend elastic-training timing only"),
    refused("trainer.checkpoint_callback_class", NOT_YET),
    no_effect("trainer.ray_wait_register_center_timeout", "verl's Ray actor start-up only"),
    no_effect("trainer.use_v1", "chooses between verl's trainer implementations"),
    no_effect("trainer.v1", SWITCHED + " (trainer_mode sync)"),
]
