"""Ulysses sequence parallelism in the dry run: the runtime's own (dp, sp) group, and the layout
facts fake tensors cannot compute (they carry no values).

The fake world builds the SP group with the runtime's `build_ulysses_group`; the models get the
Ulysses attention through the same `with_sp` the trainer builds them with, and every pass runs
the runtime's SP forward (`forward_responses(..., sp=...)`: each rank its 1/sp slice of the
packed or padded rows, the all-to-alls on the fake process group). The rank measured is the
last of its SP group: rows end in their responses, so its slice holds the most response tokens
(the most logits, the largest log-prob share of memory).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from kuberl_runtime.engine.ulysses import (
    UlyssesGroup,
    build_ulysses_group,
    local_span,
    padded_length,
)

if TYPE_CHECKING:
    from kuberl_runtime.dryrun.run import DryRunInput

SP_KEY = "actor_rollout_ref.actor.ulysses_sequence_parallel_size"


def measured_group(spec: DryRunInput) -> UlyssesGroup:
    """The runtime's SP group on the fake world, as its last rank (see the module doc)."""
    if spec.world_size % spec.sp_size:
        raise ValueError(
            f"{SP_KEY}={spec.sp_size} does not divide the world of {spec.world_size} ranks: "
            "use a divisor of trainer.nnodes x trainer.n_gpus_per_node"
        )
    group = build_ulysses_group(spec.sp_size, "cpu")
    return dataclasses.replace(group, rank=group.size - 1)


def sequence_length(spec: DryRunInput, rows: int) -> int:
    """The (padded) length one SP group splits: the packed row of `rows` full rows, or one row."""
    width = spec.prompt_length + spec.response_length
    return rows * width if spec.use_remove_padding else width


def tokens_per_rank(spec: DryRunInput, rows: int, group: UlyssesGroup) -> int:
    """The tokens this rank's forward runs for a micro-batch of `rows` full-length rows."""
    total = padded_length(sequence_length(spec, rows), group)
    per_sequence = total // group.size
    return per_sequence if spec.use_remove_padding else rows * per_sequence


def local_predictors(spec: DryRunInput, rows: int, group: UlyssesGroup) -> int:
    """How many of the positions that predict response tokens fall in this rank's slice."""
    width, length = spec.prompt_length + spec.response_length, spec.response_length
    span = local_span(padded_length(sequence_length(spec, rows), group), group)
    starts = [r * width for r in range(rows)] if spec.use_remove_padding else [0]
    count = 0
    for start in starts:
        first, stop = start + width - length - 1, start + width - 1  # [first, stop)
        count += max(0, min(stop, span.stop) - max(first, span.start))
    return count


def predictor_masks(
    spec: DryRunInput, row_counts: list[int], group: UlyssesGroup
) -> dict[tuple[int, ...], int]:
    """For `FullMasks(counts=...)`: the SP forward's "which predictors are mine" mask, by shape
    (one entry per predictor of the micro-batch), and how many of its entries are true here."""
    if group.size == 1:
        return {}
    counts = {}
    for rows in row_counts:
        predictors = (
            rows * spec.response_length if spec.use_remove_padding else spec.response_length
        )
        counts[(predictors,)] = local_predictors(spec, rows, group)
    return counts
