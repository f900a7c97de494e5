"""``strategy_args`` of each role → verl's strategy, rollout engine and parallel sizes.

kuberl trains with FSDP2 and generates with vLLM or Hugging Face; every other ROLL backend maps
to the nearest of these with a warning, and every strategy_config key is either used or named
in a warning, never dropped.
"""

from typing import Any

from kuberl_api.roll.draft import Draft
from kuberl_api.roll.fsdp2 import map_fsdp2_config
from kuberl_api.roll.models import StrategyConfig, WorkerConfig

_FSDP2 = "kuberl trains with FSDP2, sharding the model over every device"
_TRAIN_STRATEGIES = ("megatron_train", "deepspeed_train", "fsdp2_train")
_LOG_PROB_STRATEGIES = (
    *_TRAIN_STRATEGIES,
    "hf_infer",
    "megatron_infer",
    "deepspeed_infer",
    "fsdp2_infer",
)
_VLLM_KEYS = {
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_model_len": "max_model_len",
    "load_format": "load_format",
    "enforce_eager": "enforce_eager",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "enable_prefix_caching": "enable_prefix_caching",
    "disable_log_stats": "disable_log_stats",
}
_ENGINE_DECIDES = {
    "sleep_level": "ignored: kuberl's vLLM engine sleeps at level 1 between rollouts (weights "
    "kept in host memory, KV cache freed) and syncs the trained weights in on waking",
    "optimization_level": "ignored: kuberl's vLLM engine keeps vLLM's default compilation "
    "(enforce_eager switches CUDA graphs off)",
}
_LOAD_FORMATS = (
    "dummy",
    "dummy_dtensor",
    "dummy_hf",
    "dummy_megatron",
    "safetensors",
    "auto",
    "hf",
)


def map_train_strategy(
    worker: WorkerConfig, draft: Draft, role: str, node: str, world: int = 1
) -> None:
    """actor_train / critic: ``node`` is the verl node holding strategy and fsdp_config;
    ``world`` is the job's device count (FSDP2's fsdp_size is read against it)."""
    args = worker.strategy_args
    name = args.strategy_name if args else "fsdp2_train"
    sc = (args.strategy_config if args else None) or StrategyConfig()
    where = (role, "strategy_args")
    if name not in _TRAIN_STRATEGIES:
        draft.error(
            (*where, "strategy_name"),
            f"{role} trains, so it needs a training strategy",
            "use megatron_train, deepspeed_train or fsdp2_train",
            name,
        )
        return
    draft.set(f"{node}.strategy", "fsdp2", *where, "strategy_name")
    fsdp = "critic.model.fsdp_config" if node == "critic" else f"{node}.fsdp_config"
    used = _map_model_parallel(sc, draft, (*where, "strategy_config"), node)
    if name == "deepspeed_train":
        used |= _map_zero(sc, draft, (*where, "strategy_config"), fsdp)
    if name == "fsdp2_train":
        used |= map_fsdp2_config(sc, draft, (*where, "strategy_config"), fsdp, world, True)
    _warn_unused(sc, used, draft, (*where, "strategy_config"), name)


def map_reference_strategy(worker: WorkerConfig, draft: Draft, world: int = 1) -> None:
    args = worker.strategy_args
    if args is None:
        return
    where = ("reference", "strategy_args")
    sc = args.strategy_config or StrategyConfig()
    if args.strategy_name not in _LOG_PROB_STRATEGIES:
        draft.error(
            (*where, "strategy_name"),
            "the reference policy computes log-probs with a training-framework forward pass",
            "use hf_infer, fsdp2_infer, megatron_infer or megatron_train",
            args.strategy_name,
        )
        return
    used = _map_model_parallel(sc, draft, (*where, "strategy_config"), None)
    if args.strategy_name in ("fsdp2_infer", "fsdp2_train"):
        fsdp = "actor_rollout_ref.ref.fsdp_config"
        used |= map_fsdp2_config(sc, draft, (*where, "strategy_config"), fsdp, world, False)
    _warn_unused(sc, used, draft, (*where, "strategy_config"), args.strategy_name)


def map_infer_strategy(worker: WorkerConfig, draft: Draft) -> None:
    """actor_infer → ``actor_rollout_ref.rollout``."""
    args = worker.strategy_args
    name = args.strategy_name if args else "vllm"
    sc = (args.strategy_config if args else None) or StrategyConfig()
    where = ("actor_infer", "strategy_args")
    rollout = "actor_rollout_ref.rollout"
    if name in _TRAIN_STRATEGIES:
        draft.error(
            (*where, "strategy_name"),
            "actor_infer generates, so it needs an inference strategy",
            "use vllm, sglang or hf_infer",
            name,
        )
        return
    engine = {"vllm": "vllm", "sglang": "vllm", "hf_infer": "hf"}.get(name, "hf")
    draft.set(f"{rollout}.name", engine, *where, "strategy_name")
    if name == "sglang":
        draft.warn(
            (*where, "strategy_name"),
            "SGLang generation is approximated by vLLM (same sampling, another engine)",
            "use strategy_name: vllm to silence this",
            name,
        )
    elif name in ("megatron_infer", "deepspeed_infer", "fsdp2_infer"):
        draft.warn(
            (*where, "strategy_name"),
            f"{name} generation is approximated by the Hugging Face rollout engine",
            "use vllm or hf_infer",
            name,
        )
    used = _map_engine(sc, draft, (*where, "strategy_config"), name)
    used |= _map_rollout_tp(worker, sc, draft, name)
    _warn_unused(sc, used, draft, (*where, "strategy_config"), name)


def _map_engine(sc: StrategyConfig, draft: Draft, where: tuple, name: str) -> set[str]:
    rollout = "actor_rollout_ref.rollout"
    used: set[str] = set()
    if name not in ("vllm", "sglang"):
        return used
    for roll_key, verl_key in _VLLM_KEYS.items():
        value = getattr(sc, roll_key)
        if value is None:
            continue
        used.add(roll_key)
        if roll_key == "load_format" and value not in _LOAD_FORMATS:
            draft.error(
                (*where, roll_key),
                "kuberl's vLLM rollout cannot load weights this way",
                f"use one of {', '.join(_LOAD_FORMATS)}",
                value,
            )
            continue
        draft.set(f"{rollout}.{verl_key}", value, *where, roll_key)
    for key, reason in _ENGINE_DECIDES.items():
        if getattr(sc, key) is not None:
            used.add(key)
            draft.warn((*where, key), reason, "remove it to silence this", getattr(sc, key))
    if sc.block_size is not None:
        used.add("block_size")
        draft.set(f"{rollout}.engine_kwargs.vllm.block_size", sc.block_size, *where, "block_size")
    if sc.mem_fraction_static is not None:
        used.add("mem_fraction_static")
        draft.set(
            f"{rollout}.gpu_memory_utilization",
            sc.mem_fraction_static,
            *where,
            "mem_fraction_static",
        )
        draft.warn(
            (*where, "mem_fraction_static"),
            "SGLang's static memory fraction is approximated by vLLM's gpu_memory_utilization "
            "(the share of device memory for weights and KV cache)",
            "write gpu_memory_utilization instead to silence this",
            sc.mem_fraction_static,
        )
    return used


def _map_rollout_tp(worker: WorkerConfig, sc: StrategyConfig, draft: Draft, name: str) -> set[str]:
    """num_gpus_per_worker is one engine's devices: the rollout's tensor parallel size."""
    num = worker.num_gpus_per_worker
    vllm_tp = sc.tensor_parallel_size or 1
    if name == "vllm" and num not in (None, vllm_tp):
        # ROLL's WorkerConfig sets a vllm worker's num_gpus_per_worker to TP x PP itself.
        draft.warn(
            ("actor_infer", "num_gpus_per_worker"),
            f"ignored: ROLL sets a vLLM worker's num_gpus_per_worker to tensor_parallel_size "
            f"x pipeline_parallel_size ({vllm_tp}), and so does kuberl",
            f"remove it or set {vllm_tp}",
            num,
        )
        num = None
    written = {
        key: getattr(sc, key)
        for key in ("tensor_parallel_size", "tp_size", "tensor_model_parallel_size")
        if getattr(sc, key) is not None
    }
    sizes = set(written.values())
    if num is not None:
        sizes.add(num)
    if len(sizes) > 1:
        draft.error(
            ("actor_infer", "num_gpus_per_worker"),
            "disagrees with the engine's tensor parallel size "
            + ", ".join(f"{k}={v}" for k, v in written.items()),
            "one engine spans num_gpus_per_worker devices; make them equal",
            worker.num_gpus_per_worker,
        )
        return set(written)
    tp = sizes.pop() if sizes else 1
    origin = (
        ("actor_infer", "strategy_args", "strategy_config", next(iter(written)))
        if written
        else ("actor_infer", "num_gpus_per_worker")
    )
    draft.set("actor_rollout_ref.rollout.tensor_model_parallel_size", tp, *origin)
    return set(written)


def _map_model_parallel(
    sc: StrategyConfig, draft: Draft, where: tuple, node: str | None
) -> set[str]:
    used = {"use_distributed_optimizer"}  # FSDP2 always shards the optimizer state
    if sc.bf16 is True:
        used.add("bf16")  # Megatron's bf16 training: kuberl's FSDP2 computes in bf16 too
    for key, what in (
        ("tensor_model_parallel_size", "tensor"),
        ("pipeline_model_parallel_size", "pipeline"),
        ("virtual_pipeline_model_parallel_size", "virtual pipeline"),
        ("expert_model_parallel_size", "expert"),
    ):
        value = getattr(sc, key)
        if value is None:
            continue
        used.add(key)
        if value > 1:
            draft.warn(
                (*where, key),
                f"Megatron {what} parallelism is approximated: {_FSDP2} (same maths, another "
                "memory layout)",
                f"set {key}: 1 to silence this; size memory for FSDP2",
                value,
            )
    if sc.sequence_parallel is not None:
        used.add("sequence_parallel")
    if sc.context_parallel_size is not None:
        used.add("context_parallel_size")
        _map_context_parallel(sc.context_parallel_size, draft, where, node)
    return used


def _map_context_parallel(cp: int, draft: Draft, where: tuple, node: str | None) -> None:
    if cp == 1 or node is None:
        return
    sp_node = "critic" if node == "critic" else node
    draft.set(f"{sp_node}.ulysses_sequence_parallel_size", cp, *where, "context_parallel_size")
    padding = "critic.model" if node == "critic" else "actor_rollout_ref.model"
    draft.set(f"{padding}.use_remove_padding", True, *where, "context_parallel_size")
    draft.warn(
        (*where, "context_parallel_size"),
        "Megatron context parallelism is approximated by Ulysses sequence parallelism of the "
        "same size (sequences are split over devices either way)",
        "set context_parallel_size: 1 to silence this",
        cp,
    )


def _map_zero(sc: StrategyConfig, draft: Draft, where: tuple, fsdp: str) -> set[str]:
    zero = sc.zero_optimization
    stage = zero.stage if zero else 0
    draft.warn(
        (*where, "zero_optimization", "stage") if zero else where,
        f"DeepSpeed ZeRO-{stage} is approximated by FSDP2, which shards parameters, gradients "
        "and optimizer state like ZeRO-3",
        "expect ZeRO-3 memory use and communication",
        stage,
    )
    if zero and zero.offload_optimizer and zero.offload_optimizer.device == "cpu":
        draft.set(
            f"{fsdp}.optimizer_offload", True, *where, "zero_optimization", "offload_optimizer"
        )
    if zero and zero.offload_param and zero.offload_param.device == "cpu":
        draft.set(f"{fsdp}.param_offload", True, *where, "zero_optimization", "offload_param")
    for device, part in (
        (zero and zero.offload_optimizer, "offload_optimizer"),
        (zero and zero.offload_param, "offload_param"),
    ):
        if device and device.device == "nvme":
            draft.error(
                (*where, "zero_optimization", part, "device"),
                "FSDP2 cannot offload to NVMe",
                "use cpu or none",
                "nvme",
            )
    # The rest of a DeepSpeed JSON (precision, "auto" batch sizes, clipping) is DeepSpeed's own.
    return {
        "zero_optimization",
        "bf16",
        "fp16",
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "gradient_clipping",
        "zero_allow_untested_optimizer",
        "steps_per_print",
        "wall_clock_breakdown",
    }


def _warn_unused(sc: StrategyConfig, used: set[str], draft: Draft, where: tuple, name: str) -> None:
    for key in sorted(sc.model_fields_set - used):
        value: Any = getattr(sc, key)
        if value is None:
            continue
        draft.warn(
            (*where, key),
            f"ignored: {key} has no meaning for strategy {name} in kuberl",
            "remove it",
            value if not isinstance(value, dict | list) else "...",
        )
