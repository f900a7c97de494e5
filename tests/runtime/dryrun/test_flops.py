"""FLOPs per trained token of the packed update, counted by the dry run (`FlopCounterMode` over
the runtime's own forward/backward), against verl 0.9.1's analytic count (its MFU formula:
6 x dense parameters x tokens + 6 x sum(seqlen^2) x head_dim x heads x layers).

Packed 2k sequences: the varlen kernel attends within each sequence, so the count stays within
15% of the analytic one (gradient checkpointing's recompute included, the LM head only on
response positions). A dense T x T mask over the packed row (SDPA's block-diagonal mask: what
the old `setattr` bug ran) multiplies attention by the sequences per row and fails the bound.
Qwen2.5-0.5B at its 24 layers, extrapolated from 3/4/5 (`plan_dry`, dryrun/depth.py). That
extrapolation is proven here too: for the packed 2k job, every figure of every phase equals
executing all 24 layers, exactly. Hence the `runtime` marker.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch.distributed as dist
from transformers import AutoConfig
from verl.utils.flops_counter import ESTIMATE_FUNC

from kuberl_runtime.dryrun import DryRunInput, DryRunReport, model_config, plan_dry, run_dry

pytestmark = [
    pytest.mark.runtime,
    pytest.mark.skipif(dist.is_initialized(), reason="needs a process without a group"),
]

# 8 sequences of 2048 tokens packed into one micro-batch row (16k tokens, verl's usual budget)
PACKED_2K = DryRunInput(
    model_config=model_config("Qwen2.5-0.5B"),
    world_size=8,
    prompt_length=1024,
    response_length=1024,
    micro_batch_rows=8,
    log_prob_micro_batch_rows=8,
    use_remove_padding=True,
)


def verl_analytic_flops(spec: DryRunInput) -> float:
    """verl's own estimate for the update's micro-batch (fwd + bwd, no recompute)."""
    cfg = spec.model_config
    config = AutoConfig.for_model(**cfg)
    seqlens = [spec.prompt_length + spec.response_length] * spec.micro_batch_rows
    tflops = ESTIMATE_FUNC[cfg["model_type"]](config, sum(seqlens), seqlens, 1.0)
    return tflops * 1e12


def update_flops_ratio(spec: DryRunInput, report: DryRunReport) -> float:
    assert "extrapolated to 24; 5-layer check exact" in report.method
    update = report.phase("update_actor")
    assert update.tokens == spec.micro_batch_rows * (spec.prompt_length + spec.response_length)
    return update.flops / verl_analytic_flops(spec)


@pytest.fixture(scope="module")
def packed() -> DryRunReport:
    return plan_dry(PACKED_2K)


def test_packed_2k_sequences_stay_within_15_percent_of_the_analytic_count(packed):
    ratio = update_flops_ratio(PACKED_2K, packed)
    assert 0.85 <= ratio <= 1.15, ratio


def test_a_dense_mask_over_packed_rows_fails_the_bound():
    dense = dataclasses.replace(PACKED_2K, attn_implementation="sdpa")
    assert update_flops_ratio(dense, plan_dry(dense)) > 1.15


def test_extrapolated_figures_equal_every_layer_executed(packed):
    """Every figure of every phase, exactly: peaks, FLOPs, collective bytes, tokens, largest
    allocations, the bytes held at each phase's start, the resident state, the parameters."""
    full = run_dry(PACKED_2K)
    assert packed.method == "measured at 3/4/5 layers, extrapolated to 24; 5-layer check exact"
    assert full.method == "every layer executed (24 layers)"
    assert (packed.parameters, packed.static_bytes) == (full.parameters, full.static_bytes)
    assert [p.name for p in packed.phases] == [p.name for p in full.phases]
    for mine, theirs in zip(packed.phases, full.phases, strict=True):
        assert mine == theirs, mine.name
