"""ROLL keys kuberl knows but does not translate: each gets a warning or an error that says why.

They are taken out of the document before the typed models see it, so a user reads the reason
instead of "unknown key". A value listed as harmless is what kuberl does anyway: no message.
"""

from dataclasses import dataclass
from typing import Any

from kuberl_api.validation.problems import Problem, Severity, join_path


@dataclass(frozen=True)
class KnownKey:
    severity: Severity
    reason: str
    harmless: tuple[Any, ...] = (None,)


def _warn(reason: str, *harmless: Any) -> KnownKey:
    return KnownKey(Severity.WARNING, reason, (None, *harmless))


def _reject(reason: str, *harmless: Any) -> KnownKey:
    return KnownKey(Severity.ERROR, reason, (None, *harmless))


_IGNORED_RUNTIME = "ignored: kuberl's runtime and the job's Ray cluster decide this"
_NO_EQUIVALENT = "kuberl has no equivalent of this ROLL algorithm option; remove it"
_REWARD_FIX = (
    "score rows with a data_source kuberl knows, or write the job as a verl backend_config "
    "with custom_reward_function.path"
)
_MEGATRON = "ignored: a Megatron-Core {} option; kuberl trains with FSDP2 (same result)"
_ENGINE = "ignored: kuberl's rollout engine decides this"
_NO_VIDEO = "kuberl's ROLL translation reads no video inputs; use image or text prompts"

PIPELINE_KEYS: dict[str, KnownKey] = {
    "hydra": _warn("ignored: Hydra's run directory has no meaning for a kuberl job"),
    "defaults": _warn("ignored: only the deepspeed_zero* presets are known to kuberl"),
    "logging_dir": _warn("ignored: kuberl writes logs under the output directory's logs/"),
    "tracker_kwargs": _warn("ignored: configure trackers through environment variables"),
    "checkpoint_config": _warn("ignored: checkpoints go under output_dir (af_output_dir)"),
    "system_envs": _warn("ignored: set environment variables in the job's env"),
    "rpc_timeout": _warn(_IGNORED_RUNTIME),
    "model_download_type": _warn("ignored: kuberl loads models from mounted paths only"),
    "profiler_timeline": _warn(_IGNORED_RUNTIME, False),
    "profiler_memory": _warn(_IGNORED_RUNTIME, False),
    "profiler_output_dir": _warn(_IGNORED_RUNTIME),
    "num_nodes": _warn("ignored: derived from device_mapping and num_gpus_per_node"),
    "async_generation_ratio": _reject("kuberl's rollout is synchronous (on-policy); set 0", 0),
    "sequence_length": _reject("write prompt_length and response_length instead"),
    "val_prompt_length": _reject("validation uses prompt_length in kuberl; remove it"),
    "val_sequence_length": _reject("validation uses response_length in kuberl; remove it"),
    "use_reward_scaling": _reject(_NO_EQUIVALENT, False),
    "use_reward_norm": _reject(_NO_EQUIVALENT, False),
    "whiten_rewards": _reject(_NO_EQUIVALENT, False),
    "add_len_reward": _reject(_NO_EQUIVALENT, False),
    "error_max_len_clip": _reject(_NO_EQUIVALENT, False),
    "difficulty_loss_weight": _reject(_NO_EQUIVALENT, False),
    "length_loss_weight": _reject(_NO_EQUIVALENT, False),
    "train_infer_correction": _reject(_NO_EQUIVALENT),
    "use_additional_prompts": _reject("kuberl does not resample prompts; remove it", False),
    "max_running_requests": _warn(_IGNORED_RUNTIME),
    "is_num_return_sequences_expand": _warn(_IGNORED_RUNTIME),
    "enable_old_logprobs_recompute": _warn(_IGNORED_RUNTIME),
    "force_disable_old_logprobs_recompute": _warn(_IGNORED_RUNTIME),
    "l2": _reject("use training_args.weight_decay", 0, 0.0),
    "reward": _reject("kuberl scores with rule-based rewards; describe them under rewards"),
    "reward_model": _reject("kuberl runs no LLM-judge reward server; " + _REWARD_FIX),
    "reward_system_config": _reject("kuberl runs no ROLL reward system; " + _REWARD_FIX),
    "reward_norm": _reject(_NO_EQUIVALENT),
    "reward_shift": _reject(_NO_EQUIVALENT, False),
    "reward_scale": _reject(_NO_EQUIVALENT, False),
    "global_template": _warn(
        "approximated: kuberl uses the tokenizer's own chat template (ROLL's 'native')", "native"
    ),
    "offload_nccl": _warn(_IGNORED_RUNTIME, False),
    "rollout_mock": _reject("kuberl does not dump or replay rollouts; remove it"),
}

WORKER_KEYS: dict[str, KnownKey] = {
    "worker_cls": _warn("ignored: kuberl runs its own worker for each role"),
    "pg_variant": _reject("kuberl's policy loss is ROLL's ppo variant; remove it", "ppo"),
    "system_envs": _warn("ignored: set environment variables in the job's env"),
    "world_size": _warn("ignored: GPU workers are sized by device_mapping"),
    "checkpoint_config": _warn("ignored: checkpoints go under output_dir (af_output_dir)"),
    "offload_nccl": _warn(_IGNORED_RUNTIME, False),
    "use_dynamic_batching_in_train": _warn(_IGNORED_RUNTIME, False),
    "use_sequence_packing": _warn("ignored: kuberl packs sequences when use_remove_padding"),
    "max_concurrency": _warn(_IGNORED_RUNTIME),
    "use_dynamic_batching_in_infer": _warn(_IGNORED_RUNTIME, False),
    "max_tokens_per_microbatch_in_train": _warn(_IGNORED_RUNTIME),
    "max_tokens_per_microbatch_in_infer": _warn(_IGNORED_RUNTIME),
    "sequence_length_round_in_train": _warn(_IGNORED_RUNTIME),
    "sequence_length_round_in_infer": _warn(_IGNORED_RUNTIME),
    "sequence_packing_args": _warn("ignored: kuberl packs sequences when use_remove_padding"),
    # ROLL's own code reads no use_remove_padding (its FSDP2 examples set it); kuberl packs.
    "use_remove_padding": _warn(
        "ignored: ROLL reads no such key; kuberl packs sequences (model.use_remove_padding)",
        True,
    ),
}

DATA_ARGS_KEYS: dict[str, KnownKey] = {
    "interleave_probs": _warn("ignored: rows of all files are sampled uniformly"),
    "preprocessing_num_workers": _warn("ignored: kuberl tokenises prompts once at start-up"),
    "image_max_pixels": _reject(
        "kuberl resizes images as the model's processor says (its max_pixels); set max_pixels "
        "in the model's preprocessor_config.json, or resize the images, and remove it"
    ),
    "custom_data_kwargs_func": _reject("kuberl runs no ROLL data hooks; remove it"),
    **{
        f"video_{key}": _reject(_NO_VIDEO)
        for key in ("folder", "fps", "max_frames", "max_pixels", "min_pixels", "total_pixels")
    },
}

STRATEGY_CONFIG_KEYS: dict[str, KnownKey] = {
    **{
        key: _warn(_MEGATRON.format(what))
        for key, what in (
            ("recompute_granularity", "activation recompute"),
            ("recompute_modules", "activation recompute"),
            ("moe_layer_recompute", "activation recompute"),
            ("moe_grouped_gemm", "MoE kernel"),
            ("moe_token_dispatcher_type", "MoE communication"),
            ("moe_shared_expert_overlap", "MoE communication"),
            ("bias_activation_fusion", "kernel fusion"),
            ("apply_rope_fusion", "kernel fusion"),
            ("cross_entropy_loss_fusion", "kernel fusion"),
            ("overlap_grad_reduce", "communication overlap"),
            ("account_for_embedding_in_pipeline_split", "pipeline layout"),
            ("account_for_loss_in_pipeline_split", "pipeline layout"),
            ("pipeline_model_parallel_layout", "pipeline layout"),
            ("distrib_optim_fully_reshardable", "distributed optimizer"),
            ("additional_configs", "transformer"),
        )
    },
    "moe_aux_loss_coeff": _reject(
        "kuberl adds no MoE auxiliary load-balancing loss; remove it or set 0", 0, 0.0
    ),
    "cuda_graph_sizes": _warn(_ENGINE),
    "cudagraph_capture_sizes": _warn(_ENGINE),
    "disable_mm_preprocessor_cache": _warn(_ENGINE),
    "distributed_executor_backend": _warn(_ENGINE),
    "enable_memory_saver": _warn(_ENGINE, False),
    "pipeline_parallel_size": _reject(
        "kuberl's vLLM rollout splits a model by tensor parallelism only; set 1", 1
    ),
}

TRAINING_ARGS_KEYS: dict[str, KnownKey] = {
    "max_steps": _warn("ignored: the pipeline's max_steps decides the run length"),
    "seed": _warn("ignored: the pipeline's seed decides"),
}


def take_known_keys(
    node: Any, table: dict[str, KnownKey], path: tuple, prefix: str
) -> tuple[Any, list[Problem]]:
    """``node`` without the keys in ``table``, and a problem for each one that matters."""
    if not isinstance(node, dict):
        return node, []
    problems = []
    kept = {}
    for key, value in node.items():
        known = table.get(key)
        if known is None:
            kept[key] = value
        elif value not in known.harmless:
            where = join_path(prefix, *path, key)
            message = f"ROLL's {key} is not supported by kuberl"
            problems.append(Problem(where, message, known.reason, value, known.severity))
    return kept, problems


def take_all_known_keys(raw: dict, prefix: str) -> tuple[dict, list[Problem]]:
    """Apply the tables at the pipeline, worker, data_args and training_args levels."""
    body, problems = take_known_keys(raw, PIPELINE_KEYS, (), prefix)
    for role in ("actor_train", "actor_infer", "reference", "critic"):
        worker, found = take_known_keys(body.get(role), WORKER_KEYS, (role,), prefix)
        problems += found
        if isinstance(worker, dict):
            problems += _take_strategy_keys(worker, role, prefix)
            for section, table in (
                ("data_args", DATA_ARGS_KEYS),
                ("training_args", TRAINING_ARGS_KEYS),
            ):
                worker[section], found = take_known_keys(
                    worker.get(section), table, (role, section), prefix
                )
                problems += found
                if worker[section] is None:
                    del worker[section]
            body[role] = worker
    validation = body.get("validation")
    if isinstance(validation, dict) and isinstance(validation.get("data_args"), dict):
        data, found = take_known_keys(
            validation["data_args"], DATA_ARGS_KEYS, ("validation", "data_args"), prefix
        )
        body["validation"] = {**validation, "data_args": data}
        problems += found
    return body, problems


def _take_strategy_keys(worker: dict, role: str, prefix: str) -> list[Problem]:
    """Take the known keys out of ``worker``'s strategy_config (in place)."""
    args = worker.get("strategy_args")
    if not isinstance(args, dict) or not isinstance(args.get("strategy_config"), dict):
        return []
    path = (role, "strategy_args", "strategy_config")
    config, found = take_known_keys(args["strategy_config"], STRATEGY_CONFIG_KEYS, path, prefix)
    worker["strategy_args"] = {**args, "strategy_config": config}
    return found
