"""The full-depth model without its passes: what the depth extrapolation takes from it.

Building and sharding the model at its real depth is cheap (meta device, fake tensors); running
its passes is not. `survey` builds the actor as `run_dry` does, on a fake world of the job's
size, and reads: the parameter count, whether every decoder layer is alike
(`layers.model_difference`), and the weight-sync stream run at full depth. The stream's peak is
not affine in the depth: it packs tensors into fixed-size buckets, and where the bucket
boundaries fall depends on how many layers came before. So the sync's own memory (its peak less
what was held when it started) is measured here, over every layer. No warm-up pass: the stream
only all-gathers and casts (no sharding propagation to warm), and `depth.plan_dry` requires the
survey at the check depth to add exactly what that depth's real sync added.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from torch._subclasses.fake_tensor import FakeTensorMode

from kuberl_api.plan.standalone import fsdp_plan
from kuberl_runtime.device import Device
from kuberl_runtime.dryrun.layers import model_difference, num_layers
from kuberl_runtime.dryrun.probes import CollectiveBytes, LargestAllocation, MemTracker
from kuberl_runtime.dryrun.run import CPU, DryRunInput, _fake_world, _model_spec, _sync, _total
from kuberl_runtime.dryrun.sequence_parallel import measured_group
from kuberl_runtime.dryrun.vision import vision_parameters
from kuberl_runtime.engine.fsdp import apply_fsdp, torch_dtype
from kuberl_runtime.engine.model_builder import build_causal_lm_empty
from kuberl_runtime.trainer.components import with_sp


@dataclass(frozen=True)
class Survey:
    parameters: int
    vision_parameters: int
    layer_difference: str | None  # why the decoder layers are not all alike, or None
    sync_added_bytes: int  # the weight sync's peak less what was held when it started
    sync_collective_bytes: int
    sync_largest_bytes: int
    sync_largest_fp32_bytes: int


def survey(spec: DryRunInput) -> Survey:
    """The actor of `spec` at its config's depth, sharded on a fake world (see the module doc)."""
    with _fake_world(spec.world_size) as mesh, tempfile.TemporaryDirectory() as tmp:
        sp = measured_group(spec)
        model_spec = _model_spec(spec, Path(tmp))
        with FakeTensorMode(allow_non_fake_inputs=True):
            model = with_sp(sp, build_causal_lm_empty, model_spec, torch_dtype(spec.actor_dtype))
            difference = model_difference(model, num_layers(spec.model_config) or 0)
            fsdp = fsdp_plan({"dtype": spec.param_dtype})
            model = apply_fsdp(model, fsdp, Device("cuda"), mesh).to_empty(device=CPU)
            parameters = sum(p.numel() for p in model.parameters())
            tracker, comms, largest = MemTracker(model), CollectiveBytes(), LargestAllocation()
            with tracker, comms, largest:
                start = _total(tracker.get_tracker_snapshot("current"))
                _sync(model, spec)
            added = _total(tracker.get_tracker_snapshot("peak")) - start
            return Survey(
                parameters,
                vision_parameters(model),
                difference,
                added,
                comms.bytes,
                largest.largest,
                largest.largest_fp32,
            )
