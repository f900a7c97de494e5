"""The dry run at a real depth in seconds: measured at three small depths, extrapolated in depth.

A causal LM's decoder layers are identical (same shapes, same code path), so every figure of a
phase is affine in the number of layers L: its peak bytes, FLOPs, collective bytes, the bytes
held when it starts, the resident state and the parameter count; the tokens and the largest
single allocation do not change with L. `plan_dry` runs the real dry run (`run_dry`) with the
model config cut to `DEPTHS` layers, fits a + b·L through the first two, and requires the third
to be exactly on the line (fake tensors are deterministic and the tracker counts exact bytes:
there is no tolerance). The one figure that is not affine is the weight sync's peak: its buckets
fill differently with each depth. Its start is affine; what it adds is measured over every layer
by `survey.survey` (the full-depth model, built and sharded but not run), which also gives the
parameter count the extrapolation must reproduce exactly.

The smallest depth is 3: at 2 layers FSDP2's backward prefetch has no layer to fetch while the
last one computes, and the update peaks without it (measured at 7B: 2 → 3 → 4 → 5 layers add
1.02, 0.58, 0.58 GB to the update peak). With a config whose layers are not all alike (per-layer
lists such as `layer_types` that differ, MoE every k layers, any attribute of one layer that
another lacks: `layers.config_difference`, `layers.model_difference`), with fewer layers than
the largest depth, with a figure off its line, or with `full_depth`, every layer is executed and
the report says why.
"""

from __future__ import annotations

import dataclasses

from kuberl_runtime.dryrun.layers import at_depth, config_difference, num_layers
from kuberl_runtime.dryrun.run import DryRunInput, DryRunReport, PhaseResult, run_dry
from kuberl_runtime.dryrun.survey import Survey, survey

DEPTHS = (3, 4, 5)
AFFINE = ("peak_bytes", "flops", "collective_bytes", "start_bytes")
CONSTANT = ("tokens", "largest_bytes", "largest_fp32_bytes")


class OffTheLine(Exception):
    """A figure measured at the check depth is not where the first two depths put it."""


def plan_dry(spec: DryRunInput, full_depth: bool = False) -> DryRunReport:
    """The dry run of `spec`, extrapolated in depth where that is exact (see the module doc)."""
    layers = num_layers(spec.model_config)
    if full_depth:
        return _every_layer(spec, "--full-depth")
    if layers is None or layers <= DEPTHS[-1]:
        return run_dry(spec)
    difference = config_difference(spec.model_config)
    if difference:
        return _every_layer(spec, difference)
    full = survey(spec)
    if full.layer_difference:
        return _every_layer(spec, full.layer_difference)
    measured = [run_dry(_at(spec, depth)) for depth in DEPTHS]
    check = survey(_at(spec, DEPTHS[-1]))
    try:
        return extrapolate(spec, measured, check, full)
    except OffTheLine as off:
        return _every_layer(spec, str(off))


def _at(spec: DryRunInput, depth: int) -> DryRunInput:
    return dataclasses.replace(spec, model_config=at_depth(spec.model_config, depth))


def _every_layer(spec: DryRunInput, why: str) -> DryRunReport:
    report = run_dry(spec)
    return dataclasses.replace(report, method=f"{report.method}: {why}")


def extrapolate(
    spec: DryRunInput, measured: list[DryRunReport], check: Survey, full: Survey
) -> DryRunReport:
    """The report at `spec`'s depth from the reports at `DEPTHS` (`measured`), the survey at the
    check depth (`check`) and at full depth (`full`). Raises `OffTheLine` naming the figure."""
    layers = num_layers(spec.model_config)
    assert layers is not None
    low, high, last = measured
    parameters = _affine("parameters", low.parameters, high.parameters, last.parameters, layers)
    if parameters != full.parameters:
        raise OffTheLine(
            f"the parameter count extrapolates to {parameters}, the full-depth model has "
            f"{full.parameters}"
        )
    _same("vision parameters", [r.vision_parameters for r in measured] + [full.vision_parameters])
    statics = (low.static_bytes, high.static_bytes, last.static_bytes)
    static = _affine("resident bytes", *statics, layers)
    offloads = [r.offloaded_optimizer_bytes for r in measured]
    offloaded = _affine("offloaded optimizer bytes", *offloads, layers)
    phases = []
    for a, b, c in zip(low.phases, high.phases, last.phases, strict=True):
        sync = a.name == "weight_sync"  # its peak and largest tensor: `_sync_at_depth`
        fields = {
            name: _affine(
                f"{a.name} {name}", getattr(a, name), getattr(b, name), getattr(c, name), layers
            )
            for name in AFFINE
            if not (sync and name == "peak_bytes")
        }
        for name in CONSTANT:
            if not (sync and name.startswith("largest")):
                fields[name] = _same(f"{a.name} {name}", [getattr(r, name) for r in (a, b, c)])
        if sync:
            fields.update(_sync_at_depth(c, check, full, fields))
        phases.append(PhaseResult(a.name, **fields))
    depths = "/".join(map(str, DEPTHS))
    method = (
        f"measured at {depths} layers, extrapolated to {layers}; {DEPTHS[-1]}-layer check exact"
    )
    vision = full.vision_parameters
    return DryRunReport(spec, parameters, static, phases, vision, method, offloaded)


def _sync_at_depth(
    last: PhaseResult, check: Survey, full: Survey, fields: dict[str, int]
) -> dict[str, int]:
    """The sync's peak: its affine start plus what the stream adds over every layer. The
    survey's stream must add exactly what the check depth's sync added in the real run."""
    if last.peak_bytes - last.start_bytes != check.sync_added_bytes:
        raise OffTheLine(
            f"the weight sync adds {last.peak_bytes - last.start_bytes} bytes in the dry run at "
            f"{DEPTHS[-1]} layers, {check.sync_added_bytes} in the survey"
        )
    if full.sync_collective_bytes != fields["collective_bytes"]:
        raise OffTheLine(
            f"weight_sync collective bytes extrapolate to {fields['collective_bytes']}, the "
            f"full-depth stream moves {full.sync_collective_bytes}"
        )
    return {
        "peak_bytes": fields["start_bytes"] + full.sync_added_bytes,
        "largest_bytes": full.sync_largest_bytes,
        "largest_fp32_bytes": full.sync_largest_fp32_bytes,
    }


def _affine(what: str, low: int, high: int, last: int, layers: int) -> int:
    """a + b·L through (DEPTHS[0], low) and (DEPTHS[1], high), checked at DEPTHS[2], at `layers`."""
    step = (high - low) // (DEPTHS[1] - DEPTHS[0])
    if low + step * (DEPTHS[1] - DEPTHS[0]) != high:
        raise OffTheLine(f"{what}: {low} and {high} at {DEPTHS[0]}/{DEPTHS[1]} layers")
    predicted = high + step * (DEPTHS[2] - DEPTHS[1])
    if predicted != last:
        raise OffTheLine(
            f"{what} is {last} at {DEPTHS[2]} layers, the line through {DEPTHS[0]} and "
            f"{DEPTHS[1]} layers predicts {predicted}"
        )
    return high + step * (layers - DEPTHS[1])


def _same(what: str, values: list[int]) -> int:
    if len(set(values)) > 1:
        raise OffTheLine(f"{what} changes with the depth: {values}")
    return values[0]
