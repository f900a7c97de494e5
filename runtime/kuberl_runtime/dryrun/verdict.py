"""Does a dry-run report fit the accelerator, and if not, what to change."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kuberl_runtime.dryrun.layers import text_config
from kuberl_runtime.dryrun.run import DryRunReport, GiB
from kuberl_runtime.dryrun.sequence_parallel import SP_KEY
from kuberl_runtime.engine.ulysses import check_heads

# Beyond what the dry run tracks: the CUDA/HCCL context, collective buffers, and what vLLM keeps
# on the device while asleep. An allowance, not a measurement.
OVERHEAD_GIB = 3.0
# The share of the device the trainer may plan to fill: the caching allocator fragments.
HEADROOM = 0.9
_KNOBS = {
    "update_actor": "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "old_log_prob": "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "ref_log_prob": "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
}


@dataclass(frozen=True)
class FitVerdict:
    fits: bool
    capacity_gib: float
    train_peak_gib: float  # the largest phase, plus the overhead
    rollout_gib: float  # trainer's resident state + vLLM's share while generating
    problems: list[str]

    @property
    def message(self) -> str:
        if self.fits:
            return (
                f"fits: training peak {self.train_peak_gib:.1f} GiB and rollout "
                f"{self.rollout_gib:.1f} GiB of {self.capacity_gib:.1f} GiB per device"
            )
        return "does not fit:\n" + "\n".join(f"  - {p}" for p in self.problems)


def check_fit(report: DryRunReport) -> FitVerdict:
    spec = report.input
    capacity = spec.capacity_gib
    budget = capacity * HEADROOM
    problems: list[str] = []
    peak_phase = max(report.phases, key=lambda p: p.peak_bytes)
    train_peak = peak_phase.peak_bytes / GiB + OVERHEAD_GIB
    static = report.static_bytes / GiB
    if train_peak > budget:
        problems.append(_training_advice(report, peak_phase.name, budget))
    rollout = static + spec.gpu_memory_utilization * capacity + OVERHEAD_GIB
    if rollout > capacity:
        problems.append(_rollout_advice(report, capacity))
    return FitVerdict(not problems, capacity, train_peak, rollout, problems)


# Below this share of the device, vLLM's KV cache is too small to be worth suggesting.
MIN_USEFUL_UTILIZATION = 0.1


def _rollout_advice(report: DryRunReport, capacity: float) -> str:
    spec = report.input
    static = report.static_bytes / GiB
    text = (
        f"while generating, the trainer keeps {static:.1f} GiB per device and vLLM takes "
        f"gpu_memory_utilization={spec.gpu_memory_utilization} of {capacity:.1f} GiB: "
    )
    room = (capacity - static - OVERHEAD_GIB) / capacity
    if room >= MIN_USEFUL_UTILIZATION:
        return text + (
            f"lower actor_rollout_ref.rollout.gpu_memory_utilization to {room:.2f} or less, "
            f"or use more devices (the static state is sharded over all {spec.world_size})"
        )
    beside = capacity * (1 - spec.gpu_memory_utilization) - OVERHEAD_GIB
    needed = math.ceil(static * spec.world_size / beside) if beside > 0 else 2 * spec.world_size
    return text + (
        f"the trainer's state leaves vLLM no room: use at least "
        f"{max(needed, spec.world_size + 1)} devices (the static state is sharded over all "
        f"{spec.world_size})"
    )


def _training_advice(report: DryRunReport, phase: str, budget: float) -> str:
    spec = report.input
    peak = report.phase(phase).peak_bytes / GiB + OVERHEAD_GIB
    static = report.static_bytes / GiB + OVERHEAD_GIB
    text = (
        f"phase {phase} peaks at {peak:.1f} GiB per device, over {budget:.1f} GiB "
        f"({HEADROOM:.0%} of {spec.capacity_gib:.1f} GiB on {spec.accelerator})"
    )
    if static >= budget or phase not in _KNOBS:
        return text + (
            f"; the sharded model, optimizer and reference alone take "
            f"{report.static_bytes / GiB:.1f} GiB per device: "
            f"{_more_devices(report, peak, budget)} or an accelerator with more memory"
        )
    rows = _rows(spec, phase)
    per_row = (peak - static) / max(rows, 1)
    fitting = max(0, math.floor((budget - static) / per_row)) if per_row > 0 else rows
    fixes = []
    if fitting >= 1:
        fixes.append(f"lower {_KNOBS[phase]} from {rows} to {fitting}")
    else:
        fixes.append("one row does not fit: shorten prompt + response, or use more devices")
    sp_fix = _sequence_parallel_advice(report, peak, static, budget)
    if sp_fix:
        fixes.append(sp_fix)
    if phase == "update_actor" and not spec.gradient_checkpointing:
        fixes.append("set actor_rollout_ref.model.enable_gradient_checkpointing=true")
    fixes.append(
        "or use_dynamic_bsz with a token budget of about "
        f"{max(fitting, 1) * (spec.prompt_length + spec.response_length)} tokens per device"
    )
    return text + ": " + "; ".join(fixes)


def _sequence_parallel_advice(
    report: DryRunReport, peak: float, static: float, budget: float
) -> str | None:
    """The smallest Ulysses degree at which this phase fits, or None where SP cannot help.

    SP splits every sequence over `sp` ranks: what the phase adds above the sharded state
    (activations, logits) shrinks about as 1/sp; the state does not. Candidates divide the world
    and the model's heads (the runtime's own rule, `check_heads`)."""
    spec = report.input
    heads = _heads(spec.model_config)
    if heads is None:
        return None
    transient = (peak - static) * spec.sp_size
    for sp in range(spec.sp_size + 1, spec.world_size + 1):
        if spec.world_size % sp or check_heads(*heads, sp) is not None:
            continue
        if static + transient / sp <= budget:
            return (
                f"or set {SP_KEY}={sp} (Ulysses: each sequence split {sp} ways over dp "
                f"{spec.world_size // sp} x sp {sp}; about {static + transient / sp:.1f} GiB)"
            )
    return None


def _heads(config: dict) -> tuple[int, int] | None:
    """(attention heads, KV heads) of a text model or a VL model's language model."""
    text = text_config(config)
    if "num_attention_heads" not in text:
        return None
    attention = int(text["num_attention_heads"])
    return attention, int(text.get("num_key_value_heads") or attention)


def _more_devices(report: DryRunReport, peak: float, budget: float) -> str:
    """The world size at which the sharded state leaves room for this phase's own memory.

    The sharded state (parameters, optimizer, reference) divides by the world; what the phase
    adds on top (unsharded layers, activations) and the overhead do not.
    """
    world = report.input.world_size
    static = report.static_bytes / GiB
    transient = peak - OVERHEAD_GIB - static
    room = budget - OVERHEAD_GIB - transient
    if room <= 0:
        return f"use more devices (world {world} → {world * 2})"
    needed = max(world + 1, math.ceil(static * world / room))
    return f"use at least {needed} devices (world {world} now)"


def _rows(spec, phase: str) -> int:
    if phase == "update_actor":
        return spec.micro_batch_rows
    if phase == "ref_log_prob":
        return spec.ref_micro_batch_rows or spec.log_prob_micro_batch_rows
    return spec.log_prob_micro_batch_rows


def format_report(report: DryRunReport) -> str:
    spec = report.input
    lines = [
        f"model {report.parameters / 1e9:.2f}B parameters, world {spec.world_size}, "
        f"{spec.accelerator} ({spec.capacity_gib:.1f} GiB), "
        f"prompt {spec.prompt_length} + response {spec.response_length}",
        *([f"figures: {report.method}"] if report.method else []),
        *_vision_lines(report),
        *_sp_lines(report),
        f"resident per rank (sharded params, optimizer, reference): "
        f"{report.static_bytes / GiB:.2f} GiB",
        *_offload_lines(report),
        f"{'phase':<14}{'peak GiB/rank':>14}{'TFLOP/rank':>12}{'collective GiB':>16}",
    ]
    for p in report.phases:
        lines.append(
            f"{p.name:<14}{p.peak_bytes / GiB:>14.2f}{p.flops / 1e12:>12.1f}"
            f"{p.collective_bytes / GiB:>16.2f}"
        )
    lines.append(check_fit(report).message)
    return "\n".join(lines)


def _sp_lines(report: DryRunReport) -> list[str]:
    """The (dp, sp) layout and the tokens one rank runs per micro-batch."""
    spec = report.input
    tokens = ", ".join(f"{p.name} {p.tokens}" for p in report.phases if p.tokens)
    lines = []
    if spec.sp_size > 1:
        lines.append(
            f"Ulysses SP ({SP_KEY}={spec.sp_size}): dp {spec.dp_size} x sp {spec.sp_size}, "
            f"each rank runs 1/{spec.sp_size} of every sequence; figures for the last rank of "
            "an SP group (its slice holds the most response tokens)"
        )
    lines.append(f"tokens per rank and micro-batch: {tokens}")
    return lines


def _vision_lines(report: DryRunReport) -> list[str]:
    """A vision-language model: its encoder's share, and what the text-only rows leave out."""
    if not report.vision_parameters:
        return []
    state = "frozen: no optimizer state" if report.input.freeze_vision_tower else "trained"
    return [
        f"vision encoder {report.vision_parameters / 1e9:.2f}B of those parameters ({state}); "
        "rows are text only: the encoder's activations are not in the peaks"
    ]


def _offload_lines(report: DryRunReport) -> list[str]:
    """optimizer_offload: the optimizer state kept off the device but during each step."""
    if not report.input.optimizer_offload:
        return []
    return [
        f"optimizer state in host memory (actor.fsdp_config.optimizer_offload): "
        f"{report.offloaded_optimizer_bytes / GiB:.2f} GiB per rank, not resident; on the device "
        "only during each optimizer step (counted in update_actor's peak)"
    ]
