"""The reward model's share of each device in `kuberl plan`.

* Discriminative (`reward_model.enable`, a sequence classifier): FSDP2-sharded over every rank
  (`reward_model.model.fsdp_config`), resident for the whole run, so its shard adds to the
  trainer's resident state in every phase: weights / world_size in the plan's dtype.
* Generative (`plan.reward_judge`, a vLLM judge on each rank): vLLM takes
  `reward_model.rollout.gpu_memory_utilization` of the device (weights and KV cache) while it
  judges. With `free_cache_engine` on a device with sleep mode (GPU) it sleeps outside reward
  passes (weights to host memory, KV cache freed); otherwise it stays resident beside the
  rollout's share.

The parameter count comes from the RM's config.json (a meta-device build, no weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kuberl_api.plan.run_plan import RunPlan
from kuberl_runtime.dryrun.shapes import model_config
from kuberl_runtime.dryrun.verdict import HEADROOM, OVERHEAD_GIB, FitVerdict

GiB = 1024**3
_DTYPE_BYTES = {"bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "fp32": 4, "float32": 4}


@dataclass(frozen=True)
class RewardModelShare:
    kind: str  # "discriminative" or "generative"
    path: str
    parameters: int
    resident_bytes: int  # per rank, for the whole run
    judging_bytes: int  # per rank, while the judge runs (generative only)
    note: str


def share_of(plan: RunPlan, capacity_gib: float) -> RewardModelShare | None:
    """None without a reward model; raises FileNotFoundError when its config is unreadable."""
    rm, judge = plan.reward_model, plan.reward_judge
    if judge.enable:
        params = count_parameters(model_config(judge.model_path), causal=True)
        judging = int(judge.gpu_memory_utilization * capacity_gib * GiB)
        sleeps = judge.free_cache_engine and plan.placement.device != "cpu"
        note = (
            "sleeps outside reward passes (free_cache_engine, sleep mode)"
            if sleeps
            else "stays resident (no sleep mode on cpu, or free_cache_engine off)"
        )
        return RewardModelShare(
            "generative", judge.model_path, params, 0 if sleeps else judging, judging, note
        )
    if not rm.enable:
        return None
    params = count_parameters(model_config(rm.path), causal=False)
    per_rank = -(-params // plan.placement.world_size)
    dtype = _DTYPE_BYTES.get(rm.fsdp_config.model_dtype, 4)
    note = f"FSDP2 shard of {plan.placement.world_size} ranks, {rm.fsdp_config.model_dtype}"
    return RewardModelShare("discriminative", rm.path, params, per_rank * dtype, 0, note)


def count_parameters(config: dict[str, Any], causal: bool) -> int:
    """Parameters of the model `config` describes (built on the meta device)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    values = dict(config)
    model_type = values.pop("model_type")
    hf_config = AutoConfig.for_model(model_type, **values)
    if not causal:
        hf_config.num_labels = 1
    factory = AutoModelForCausalLM if causal else AutoModelForSequenceClassification
    with torch.device("meta"):
        model = factory.from_config(hf_config)
    return sum(p.numel() for p in model.parameters())


def format_share(share: RewardModelShare) -> str:
    head = f"reward model ({share.kind}) {share.path}: {share.parameters / 1e9:.3f}B parameters"
    if share.kind == "generative":
        return (
            f"{head}; vLLM judge on each rank takes {share.judging_bytes / GiB:.2f} GiB while "
            f"judging, {share.resident_bytes / GiB:.2f} GiB resident otherwise ({share.note})"
        )
    return f"{head}; resident per rank {share.resident_bytes / GiB:.3f} GiB ({share.note})"


def problems(share: RewardModelShare, verdict: FitVerdict, static_gib: float) -> list[str]:
    """What the reward model's share makes too large, beside the trainer's own verdict."""
    resident = share.resident_bytes / GiB
    capacity = verdict.capacity_gib
    problems = []
    if verdict.train_peak_gib + resident > capacity * HEADROOM:
        problems.append(
            f"training peak {verdict.train_peak_gib:.1f} GiB + reward model {resident:.1f} GiB "
            f"exceeds {HEADROOM:.0%} of {capacity:.1f} GiB: shard it over more ranks or use a "
            "smaller reward model"
        )
    if verdict.rollout_gib + resident > capacity:
        problems.append(
            f"rollout {verdict.rollout_gib:.1f} GiB + reward model {resident:.1f} GiB exceeds "
            f"{capacity:.1f} GiB: lower actor_rollout_ref.rollout.gpu_memory_utilization"
        )
    judging = static_gib + share.judging_bytes / GiB + OVERHEAD_GIB
    if share.judging_bytes and judging > capacity:
        problems.append(
            f"judging {judging:.1f} GiB (trainer {static_gib:.1f} + judge) exceeds "
            f"{capacity:.1f} GiB: lower reward_model.rollout.gpu_memory_utilization"
        )
    return problems
