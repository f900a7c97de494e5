"""verl's per-step metrics: data statistics of the batch, timings, throughput, and reduction.

Reduction (verl): lists gathered from all ranks are averaged, except keys containing "max"
(maximum) or "min" (minimum).
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import numpy as np
import torch

from kuberl_runtime.device import Device
from kuberl_runtime.distributed import all_gather_objects
from kuberl_runtime.trainer.batch import Batch


def reduce_metrics(metrics: Mapping[str, list[float]]) -> dict[str, float]:
    out = {}
    for key, values in metrics.items():
        if not values:
            continue
        if "max" in key:
            out[key] = float(np.max(values))
        elif "min" in key:
            out[key] = float(np.min(values))
        else:
            out[key] = float(np.mean(values))
    return out


def reduce_across_ranks(metrics: Mapping[str, list[float]]) -> dict[str, float]:
    merged: dict[str, list[float]] = {}
    for part in all_gather_objects(dict(metrics)):
        for key, values in part.items():
            merged.setdefault(key, []).extend(values)
    return reduce_metrics(merged)


@contextmanager
def timer(name: str, timings: dict[str, float]) -> Iterator[None]:
    start = time.perf_counter()
    yield
    timings[name] = timings.get(name, 0.0) + time.perf_counter() - start


def _stats(prefix: str, values: torch.Tensor) -> dict[str, float]:
    values = values.float()
    if values.numel() == 0:
        return {}
    return {
        f"{prefix}/mean": float(values.mean()),
        f"{prefix}/max": float(values.max()),
        f"{prefix}/min": float(values.min()),
    }


def compute_data_metrics(batch: Batch, *, use_critic: bool) -> dict[str, float]:
    mask = batch["response_mask"].bool()
    prompt_mask = batch["attention_mask"][:, : -batch.response_length]
    response_lengths = mask.sum(-1).float()
    prompt_lengths = prompt_mask.sum(-1).float()
    metrics = {
        **_stats("critic/score", batch["token_level_scores"].sum(-1)),
        **_stats("critic/rewards", batch["token_level_rewards"].sum(-1)),
        **_stats("critic/advantages", batch["advantages"][mask]),
        **_stats("critic/returns", batch["returns"][mask]),
        **_stats("response_length", response_lengths),
        "response_length/clip_ratio": float(
            (response_lengths == batch.response_length).float().mean()
        ),
        **_stats("prompt_length", prompt_lengths),
        "prompt_length/clip_ratio": float((prompt_lengths == prompt_mask.shape[1]).float().mean()),
    }
    if use_critic:
        values, returns = batch["values"][mask], batch["returns"][mask]
        metrics.update(_stats("critic/values", values))
        variance = torch.var(returns - values) / (torch.var(returns) + 1e-5)
        metrics["critic/vf_explained_var"] = float(1.0 - variance)
    return metrics


def compute_timing_metrics(batch: Batch, timings: Mapping[str, float]) -> dict[str, float]:
    response_tokens = float(batch["response_mask"].sum())
    all_tokens = float(batch["attention_mask"].sum())
    out = {f"timing_s/{name}": value for name, value in timings.items()}
    for name, value in timings.items():
        if name == "step":
            continue
        tokens = response_tokens if name == "gen" else all_tokens
        out[f"timing_per_token_ms/{name}"] = value * 1000 / max(tokens, 1.0)
    return out


def compute_throughput_metrics(
    batch: Batch, step_time: float, world_size: int, device: Device
) -> dict[str, float]:
    total_tokens = float(batch["attention_mask"].sum())
    allocated, reserved = device.max_memory_gb()
    return {
        "perf/total_num_tokens": total_tokens,
        "perf/time_per_step": step_time,
        "perf/throughput": total_tokens / (step_time * world_size),
        "perf/max_memory_allocated_gb": allocated,
        "perf/max_memory_reserved_gb": reserved,
        # Peak resident memory of this process (Linux reports KiB).
        "perf/cpu_memory_used_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }
