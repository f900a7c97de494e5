"""The GPU path, executed without a GPU: the runtime's own build, sharding and passes at real sizes.

`run_dry(DryRunInput)` builds the model from its config on the meta device with the runtime's
builder, shards it with the runtime's FSDP2 wrapper over a fake process group of the job's world
size, and runs the runtime's own init, old/ref log-prob passes, one actor update and the weight
sync under `FakeTensorMode` (no storage, no weights), measuring per rank and phase the peak bytes
(FSDP2 memory tracker), FLOPs (FlopCounterMode) and collective bytes. `verdict.check_fit`
compares that with the accelerator's memory beside the rollout engine's share. `plan_dry` is what
`kuberl plan` and the runtime's memory check call: the same dry run at three small depths,
extrapolated to the model's depth where that is exact (`dryrun/depth.py`), else every layer.
"""

from kuberl_runtime.dryrun.depth import plan_dry
from kuberl_runtime.dryrun.run import DryRunInput, DryRunReport, PhaseResult, run_dry
from kuberl_runtime.dryrun.shapes import ACCELERATORS, MODEL_SHAPES, model_config
from kuberl_runtime.dryrun.verdict import FitVerdict, check_fit, format_report

__all__ = [
    "ACCELERATORS",
    "MODEL_SHAPES",
    "DryRunInput",
    "DryRunReport",
    "FitVerdict",
    "PhaseResult",
    "check_fit",
    "format_report",
    "model_config",
    "plan_dry",
    "run_dry",
]
