"""Fates of ``actor_rollout_ref.rollout.*``."""

from kuberl_api.keys import multi_turn
from kuberl_api.keys.entry import honoured, no_effect, refused
from kuberl_api.keys.where import COMPONENTS, DEPRECATED, LOOP, ROLLOUT_CORRECTION, VLLM

P = "actor_rollout_ref.rollout."
SAMPLING = ["temperature", "top_k", "top_p", "do_sample", "n", "ignore_eos"]
VLLM_KEYS = [
    "dtype",
    "gpu_memory_utilization",
    "enforce_eager",
    "free_cache_engine",
    "load_format",
    "tensor_model_parallel_size",
    "max_num_batched_tokens",
    "max_model_len",
    "max_num_seqs",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "disable_log_stats",
    "engine_kwargs.vllm",
]
NO_PARALLEL = "not supported; remove it or set 1 (engine_kwargs.vllm reaches other vLLM options)"

KEYS = [
    honoured(P + "name", COMPONENTS),
    no_effect(
        P + "mode",
        "verl 0.9.1 deprecates it (async only); kuberl runs one colocated engine per rank, "
        "and sync and async sample alike",
        as_default=("sync", "async"),
    ),
    *[honoured(P + k, LOOP) for k in SAMPLING],
    honoured(P + "prompt_length", LOOP),
    honoured(P + "response_length", LOOP),
    *[honoured(P + k, VLLM) for k in VLLM_KEYS],
    no_effect(
        P + "layered_summon",
        "kuberl's weight sync never gathers the whole model: one tensor at a time "
        "(trainer/weight_sync.py), LoRA merged one module at a time, cast a bucket at a time",
    ),
    refused(P + "data_parallel_size", NO_PARALLEL),
    refused(P + "expert_parallel_size", NO_PARALLEL),
    refused(P + "pipeline_model_parallel_size", NO_PARALLEL),
    honoured(P + "log_prob_micro_batch_size", DEPRECATED),
    honoured(P + "log_prob_micro_batch_size_per_gpu", LOOP),
    honoured(P + "log_prob_use_dynamic_bsz", LOOP),
    honoured(P + "log_prob_max_token_len_per_gpu", LOOP),
    honoured(P + "calculate_log_probs", ROLLOUT_CORRECTION),
    no_effect(
        P + "engine_kwargs.sglang",
        "read by an SGLang engine only; kuberl generates with vLLM or HF (rollout.name)",
    ),
    *[honoured(P + "val_kwargs." + k, LOOP) for k in ("top_k", "top_p", "temperature", "n")],
    honoured(P + "val_kwargs.do_sample", LOOP),
    *multi_turn.KEYS,
]
