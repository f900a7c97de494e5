"""Execute the runtime's GPU path on fake tensors at one world size and measure each phase."""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.utils.flop_counter import FlopCounterMode

from kuberl_api.plan.sections import ActorPlan, FSDPPlan
from kuberl_api.plan.standalone import actor_plan, fsdp_plan
from kuberl_runtime.algorithms import GlobalBatch
from kuberl_runtime.device import Device
from kuberl_runtime.dryrun.layers import num_layers, text_config
from kuberl_runtime.dryrun.packed import FLASH_VARLEN, FullMasks, sequences_of
from kuberl_runtime.dryrun.probes import (
    FLOP_FORMULAS,
    CollectiveBytes,
    LargestAllocation,
    MemTracker,
)
from kuberl_runtime.dryrun.sequence_parallel import (
    measured_group,
    predictor_masks,
    tokens_per_rank,
)
from kuberl_runtime.dryrun.shapes import ACCELERATORS
from kuberl_runtime.dryrun.state_bytes import local_bytes, optimizer_bytes
from kuberl_runtime.dryrun.values import KnownValues
from kuberl_runtime.dryrun.vision import (
    create_vision_optimizer_state,
    vision_parameters,
)
from kuberl_runtime.engine.actor import Actor, ActorSettings
from kuberl_runtime.engine.fsdp import apply_fsdp, torch_dtype
from kuberl_runtime.engine.init import load_from_rank0
from kuberl_runtime.engine.micro import MicroBatching
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm_empty
from kuberl_runtime.engine.optim import clip_and_step_unchecked, grad_norm
from kuberl_runtime.engine.optim_offload import OptimizerOffload
from kuberl_runtime.engine.ulysses import UlyssesGroup
from kuberl_runtime.rollout.vllm import DEFAULT_BUCKET_BYTES, buckets
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.components import with_sp

GiB = 1 << 30
CPU = torch.device("cpu")  # fake tensors: no storage; stands for the accelerator
HOST = torch.device("meta")  # stands for host memory (optimizer_offload): not the accelerator's


@dataclass(frozen=True)
class DryRunInput:
    """What the dry run needs from a job (later filled from the frozen run plan)."""

    model_config: dict[str, Any]
    world_size: int
    prompt_length: int
    response_length: int
    micro_batch_rows: int  # actor.ppo_micro_batch_size_per_gpu
    log_prob_micro_batch_rows: int  # rollout.log_prob_micro_batch_size_per_gpu
    ref_micro_batch_rows: int | None = None  # ref.log_prob_micro_batch_size_per_gpu
    gradient_checkpointing: bool = True
    needs_reference: bool = True
    use_remove_padding: bool = True  # actor_rollout_ref.model.use_remove_padding: packed rows
    # The attention kernel: flash-attn's varlen, as on a GPU (the CUDA image ships flash-attn),
    # or "sdpa", a dense T x T attention over each packed row (what CPU runs).
    attn_implementation: str = FLASH_VARLEN
    param_dtype: str = "bf16"  # fsdp_config.dtype: the compute (all-gathered) dtype
    actor_dtype: str = "fp32"  # fsdp_config.model_dtype: the actor's master weights
    ref_dtype: str = "fp32"  # ref.fsdp_config.model_dtype
    rollout_dtype: str = "bf16"
    gpu_memory_utilization: float = 0.5
    accelerator: str = "H100"
    # The device's own memory when known (the runtime's check reads it from torch); else the
    # table's figure for `accelerator`.
    accelerator_memory_gib: float | None = None
    # actor.ulysses_sequence_parallel_size: the world is dp x sp; each SP group's ranks hold the
    # same rows (the micro-batch rows above are per SP group) and run 1/sp of every sequence.
    sp_size: int = 1
    # actor.freeze_vision_tower (a vision-language model): the encoder gets no optimizer state.
    freeze_vision_tower: bool = False
    optimizer_offload: bool = False  # actor.fsdp_config's: state on the host but in each step

    @property
    def dp_size(self) -> int:
        return self.world_size // self.sp_size

    @property
    def capacity_gib(self) -> float:
        if self.accelerator_memory_gib is not None:
            return self.accelerator_memory_gib
        return ACCELERATORS[self.accelerator]


@dataclass(frozen=True)
class PhaseResult:
    name: str
    peak_bytes: int
    flops: int
    collective_bytes: int
    tokens: int = 0
    largest_bytes: int = 0  # the largest single tensor allocated
    largest_fp32_bytes: int = 0
    start_bytes: int = 0  # held when the phase starts (its peak less what the phase adds)


@dataclass
class DryRunReport:
    input: DryRunInput
    parameters: int
    static_bytes: int  # per rank after the update: sharded params, optimizer state, reference
    phases: list[PhaseResult] = field(default_factory=list)
    vision_parameters: int = 0  # of `parameters`: a vision-language model's vision encoder
    # How the figures were obtained: every layer executed, or extrapolated (dryrun/depth.py).
    method: str = ""
    # optimizer_offload: the optimizer state per rank, on the host but in each step (not static)
    offloaded_optimizer_bytes: int = 0

    def phase(self, name: str) -> PhaseResult:
        return next(p for p in self.phases if p.name == name)


def run_dry(spec: DryRunInput) -> DryRunReport:
    """Every phase on one rank of a fake world of `spec.world_size` ranks (with Ulysses SP, the
    last rank of an SP group: dryrun/sequence_parallel.py)."""
    with _fake_world(spec.world_size) as mesh, tempfile.TemporaryDirectory() as tmp:
        sp = measured_group(spec)
        model_spec = _model_spec(spec, Path(tmp))
        width = spec.prompt_length + spec.response_length
        masks = FullMasks(predictor_masks(spec, _row_counts(spec), sp))
        values = contextlib.nullcontext() if spec.use_remove_padding else KnownValues()
        with FakeTensorMode(allow_non_fake_inputs=True), masks, sequences_of(width), values:
            return _run_phases(spec, model_spec, mesh, sp)


def _row_counts(spec: DryRunInput) -> list[int]:
    rows = [spec.micro_batch_rows, spec.log_prob_micro_batch_rows]
    return rows + ([spec.ref_micro_batch_rows] if spec.ref_micro_batch_rows else [])


@contextlib.contextmanager
def _fake_world(world_size: int) -> Iterator[DeviceMesh]:
    if dist.is_initialized():
        raise RuntimeError("the dry run needs a process without a process group of its own")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        yield init_device_mesh("cpu", (world_size,))
    finally:
        dist.destroy_process_group()


def _model_spec(spec: DryRunInput, tmp: Path) -> ModelSpec:
    import json

    (tmp / "config.json").write_text(json.dumps(spec.model_config))
    return ModelSpec(
        path=str(tmp),
        override_config={"attn_implementation": spec.attn_implementation},
        enable_gradient_checkpointing=spec.gradient_checkpointing,
        freeze_vision_tower=spec.freeze_vision_tower,
    )


def _run_phases(
    spec: DryRunInput, model_spec: ModelSpec, mesh: DeviceMesh, sp: UlyssesGroup
) -> DryRunReport:
    gpu = Device("cuda")  # the precision/offload decisions of a GPU run; storage stays fake
    fsdp = fsdp_plan({"dtype": spec.param_dtype})
    phases: list[PhaseResult] = []
    # FSDP shards over the whole world (dp x sp), as the runtime's build_sharded does.
    actor_model = with_sp(sp, build_causal_lm_empty, model_spec, torch_dtype(spec.actor_dtype))
    model = apply_fsdp(actor_model, fsdp, gpu, mesh)
    parameters = sum(p.numel() for p in model.parameters())  # DTensor numel: the global one
    host = _host_state_dict(model_spec)  # rank 0's checkpoint read, in host memory: not tracked
    phases.append(_measure_init(model, host))
    ref = None
    if spec.needs_reference:
        ref_spec = dataclasses.replace(model_spec, enable_gradient_checkpointing=False)
        ref_dtype = torch_dtype(spec.ref_dtype)
        ref = _sharded(ref_spec, fsdp, gpu, mesh, ref_dtype, sp).requires_grad_(False)
    actor = Actor(model, _actor_config(spec), _settings(spec, sp), ref_model=ref)
    ref_bytes = local_bytes(ref) if ref is not None else 0
    update_batch = _batch(spec, spec.micro_batch_rows, with_targets=True)
    offload = OptimizerOffload(actor.optimizer, enabled=spec.optimizer_offload, host=HOST)

    def update() -> None:
        model.train()
        actor.backward_micro(update_batch, _global_batch(spec))
        create_vision_optimizer_state(model)  # the vision tower's gradients come last
        with offload.for_step():
            clip_and_step_unchecked(model, actor.optimizer, 1.0, grad_norm(model))

    # The update first: from then on the optimizer state exists (resident, or with offload on the
    # host but in each step). (`_measure` runs each phase once first: the update's peak counts it.)
    update_tokens = tokens_per_rank(spec, spec.micro_batch_rows, sp)
    phases.append(
        _measure("update_actor", model, actor.optimizer, update, update_tokens, ref_bytes)
    )
    log_prob_batch = _batch(spec, spec.log_prob_micro_batch_rows)
    phases.append(
        _measure(
            "old_log_prob",
            model,
            actor.optimizer,
            lambda: actor.compute_log_prob(log_prob_batch, MicroBatching(), calculate_entropy=True),
            tokens_per_rank(spec, spec.log_prob_micro_batch_rows, sp),
            ref_bytes,
        )
    )
    optimizer = optimizer_bytes(actor.optimizer)
    offloaded = optimizer if spec.optimizer_offload else 0
    actor_bytes = local_bytes(model) + optimizer - offloaded
    if ref is not None:
        ref_rows = spec.ref_micro_batch_rows or spec.log_prob_micro_batch_rows
        ref_batch = _batch(spec, ref_rows)
        phases.append(
            _measure(
                "ref_log_prob",
                ref,
                None,
                lambda: actor.compute_ref_log_prob(ref_batch, MicroBatching()),
                tokens_per_rank(spec, ref_rows, sp),
                actor_bytes,
            )
        )
    sync = _measure("weight_sync", model, actor.optimizer, lambda: _sync(model, spec), 0, ref_bytes)
    phases.append(sync)
    static = actor_bytes + ref_bytes
    layers = num_layers(spec.model_config)
    method = f"every layer executed ({layers} layers)" if layers else "every layer executed"
    vision = vision_parameters(model)
    return DryRunReport(spec, parameters, static, phases, vision, method, offloaded)


def _sharded(
    spec: ModelSpec,
    fsdp: FSDPPlan,
    device: Device,
    mesh: DeviceMesh,
    dtype: torch.dtype,
    sp: UlyssesGroup,
) -> nn.Module:
    model = apply_fsdp(with_sp(sp, build_causal_lm_empty, spec, dtype), fsdp, device, mesh)
    return model.to_empty(device=CPU)


def _host_state_dict(spec: ModelSpec) -> dict[str, torch.Tensor]:
    return build_causal_lm_empty(spec).to_empty(device=CPU).state_dict()


def _measure(
    name: str,
    model: nn.Module,
    optimizer: Any,
    fn: Callable[[], Any],
    tokens: int,
    resident: int,
) -> PhaseResult:
    """Steady-state peak of `fn` over `model` (+ its optimizer), plus `resident` bytes of the
    other models.

    `fn` runs twice. The first run counts FLOPs (the counter's module hooks keep activations alive
    for backward, so it cannot share the memory run) and warms up: the optimizer state exists
    from then on, as in every later step, and DTensor's sharding-propagation cache is filled.
    The warm-up matters under `FakeTensorMode`: DTensor propagates an op it has not seen by
    running it on fake tensors of the *global* shapes, in the fake mode already active, which is
    the dry run's own, so the memory tracker counts them. On a GPU those are free (a private fake
    mode). Measured cold, the first `grad_norm` (one `_foreach_norm` over every gradient) showed
    the whole unsharded fp32 model as an allocation: 122 GiB at 32B, the "133.5 GiB" update peak.
    """
    flops = FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS)
    with flops:
        fn()
    tracker = MemTracker(model, optimizer)
    comms, largest = CollectiveBytes(), LargestAllocation()
    with tracker, comms, largest:
        start = _total(tracker.get_tracker_snapshot("current"))
        fn()
    peak = _total(tracker.get_tracker_snapshot("peak"))
    return PhaseResult(
        name,
        peak + resident,
        flops.get_total_flops(),
        comms.bytes,
        tokens,
        largest.largest,
        largest.largest_fp32,
        start + resident,
    )


def _total(snapshot: dict[Any, dict[str, int]]) -> int:
    """The largest device total of a memory tracker's snapshot (0 when none), `HOST`'s aside."""
    totals = (snap["Total"] for device, snap in snapshot.items() if device != HOST)
    return int(max(totals, default=0))


def _measure_init(model: nn.Module, host: dict[str, torch.Tensor]) -> PhaseResult:
    """Sharded init. No module runs, so the tracker samples no peak inside it: the peak is the
    resident shards it leaves plus the largest transient tensor (one broadcast buffer), which is
    exactly what is alive at the worst moment of the one-tensor-at-a-time loop."""
    tracker, comms, largest = MemTracker(model), CollectiveBytes(), LargestAllocation()
    with tracker, comms, largest:
        load_from_rank0(model, host, CPU)
    resident = _total(tracker.get_tracker_snapshot("current"))
    return PhaseResult(
        "init",
        resident + largest.largest,
        0,
        comms.bytes,
        0,
        largest.largest,
        largest.largest_fp32,
    )


def _sync(model: nn.Module, spec: DryRunInput, device: torch.device = CPU) -> None:
    """The runtime's sync stream: full tensors, cast and bucketed as the vLLM rollout does
    (`device`: where the buckets land; fake storage on the CPU here, the GPU in
    bench/gpu_plan_check.py)."""
    from torch.distributed.tensor import DTensor

    stream = (
        (n, t.full_tensor() if isinstance(t, DTensor) else t) for n, t in model.state_dict().items()
    )
    for bucket in buckets(stream, DEFAULT_BUCKET_BYTES, torch_dtype(spec.rollout_dtype), device):
        del bucket


def _actor_config(spec: DryRunInput) -> ActorPlan:
    """One micro-batch of `micro_batch_rows` per data-parallel rank and mini-batch."""
    node = {
        "ppo_mini_batch_size": spec.dp_size * spec.micro_batch_rows,
        "ppo_micro_batch_size_per_gpu": spec.micro_batch_rows,
        "use_kl_loss": spec.needs_reference,
        "ulysses_sequence_parallel_size": spec.sp_size,
    }
    return actor_plan(node, dp_size=spec.dp_size)


def _global_batch(spec: DryRunInput) -> GlobalBatch:
    """The update's counts with every rank holding full-length rows, as `_batch` builds them."""
    rows = spec.dp_size * spec.micro_batch_rows
    return GlobalBatch(
        dp_size=spec.dp_size,
        batch_num_tokens=rows * spec.response_length,
        global_batch_size=rows,
    )


def _settings(spec: DryRunInput, sp: UlyssesGroup) -> ActorSettings:
    return ActorSettings(
        temperature=1.0,
        use_remove_padding=spec.use_remove_padding,
        rollout_n=1,
        world_size=spec.dp_size,
        total_training_steps=1,
        sp=sp,
    )


def _batch(spec: DryRunInput, rows: int, with_targets: bool = False) -> Batch:
    """Full-length rows (prompt + response, no padding), each its own prompt (no prompt shared):
    the worst case of a micro-batch."""
    width = spec.prompt_length + spec.response_length
    vocab = int(text_config(spec.model_config)["vocab_size"])  # a VL model's language model
    tensors = {
        "input_ids": (torch.arange(rows)[:, None] % vocab).expand(rows, width).contiguous(),
        "attention_mask": torch.ones(rows, width, dtype=torch.long),
        "position_ids": torch.arange(width).expand(rows, width).contiguous(),
        "responses": torch.zeros(rows, spec.response_length, dtype=torch.long) % vocab,
        "response_mask": torch.ones(rows, spec.response_length, dtype=torch.long),
    }
    if with_targets:
        shape = (rows, spec.response_length)
        tensors["advantages"] = torch.zeros(shape)
        tensors["old_log_probs"] = torch.zeros(shape)
        tensors["ref_log_prob"] = torch.zeros(shape)
    return Batch(tensors)
