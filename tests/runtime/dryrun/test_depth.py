"""Depth extrapolation (dryrun/depth.py): the dry run at 3/4/5 layers, extrapolated to the
model's depth, gives exactly the figures of executing every layer (a narrow Qwen2.5 at 8 layers,
world 8, packed rows; a VL model's text layers); configs whose layers are not all alike run every
layer and say why.

The proof is about depth, not width: a narrow model runs the same code path per layer (FSDP2's
prefetch, checkpointing, the packed varlen kernel, the sync's buckets) in a fraction of the time.
The 7B-specific caveat stays in depth.py and docs/gpu.md: at 2 layers FSDP2's backward has no
next layer to prefetch and the update peaks lower (measured at 7B), hence the smallest depth of 3.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.distributed as dist

from kuberl_runtime.dryrun import DryRunInput, PhaseResult, model_config, plan_dry, run_dry
from kuberl_runtime.dryrun.depth import DEPTHS, OffTheLine, extrapolate
from kuberl_runtime.dryrun.layers import at_depth, config_difference, model_difference
from kuberl_runtime.dryrun.run import DryRunReport
from kuberl_runtime.dryrun.survey import Survey
from support.narrow import narrow_job

pytestmark = pytest.mark.skipif(dist.is_initialized(), reason="needs a process without a group")

# The routing and line checks, which never run the dry run: Qwen2.5-0.5B at its 24 layers.
QWEN_05B = DryRunInput(
    model_config=model_config("Qwen2.5-0.5B"),
    world_size=8,
    prompt_length=256,
    response_length=512,
    micro_batch_rows=4,
    log_prob_micro_batch_rows=8,
)

# Qwen2.5's architecture at a width that costs little: 8 layers, 4 heads over 2 KV heads, 4k vocab.
NARROW = narrow_job(8)


@pytest.mark.runtime
def test_extrapolated_figures_equal_every_layer_executed():
    """Every figure of every phase, exactly: peaks, FLOPs, collective bytes, tokens, largest
    allocations, the bytes held at each phase's start, the resident state, the parameters."""
    extrapolated = plan_dry(NARROW)
    full = run_dry(NARROW)
    assert extrapolated.method == (
        "measured at 3/4/5 layers, extrapolated to 8; 5-layer check exact"
    )
    assert full.method == "every layer executed (8 layers)"
    assert (extrapolated.parameters, extrapolated.static_bytes) == (
        full.parameters,
        full.static_bytes,
    )
    assert [p.name for p in extrapolated.phases] == [p.name for p in full.phases]
    for mine, theirs in zip(extrapolated.phases, full.phases, strict=True):
        assert mine == theirs, mine.name


def test_non_uniform_layer_types_run_every_layer(monkeypatch):
    """A hybrid config (full then sliding-window attention): no survey, no small depths, one dry
    run at the config's depth, and the report says why. (Executing every layer is the dry run
    itself: `test_extrapolated_figures_equal_every_layer_executed` runs it at full depth.)"""
    from kuberl_runtime.dryrun import depth

    config = {
        **NARROW.model_config,
        "num_hidden_layers": 6,
        "use_sliding_window": True,
        "sliding_window": 16,
        "max_window_layers": 3,
        "layer_types": ["full_attention"] * 3 + ["sliding_attention"] * 3,
    }
    ran = []

    def fake_run(spec):
        ran.append(spec.model_config)
        return DryRunReport(spec, 0, 0, [], method="every layer executed (6 layers)")

    monkeypatch.setattr(depth, "run_dry", fake_run)
    monkeypatch.setattr(depth, "survey", lambda spec: pytest.fail("no survey"))
    report = plan_dry(dataclasses.replace(NARROW, model_config=config))
    assert report.method == (
        "every layer executed (6 layers): the layers differ in layer_types "
        "('full_attention', 'sliding_attention')"
    )
    assert ran == [config]  # once, every layer, the config as given


def test_full_depth_and_shallow_models_run_every_layer(monkeypatch):
    """No survey, no small depths: `run_dry` once, at the config's depth."""
    from kuberl_runtime.dryrun import depth

    ran = []

    def fake_run(spec):
        ran.append(spec.model_config["num_hidden_layers"])
        layers = spec.model_config["num_hidden_layers"]
        return DryRunReport(spec, 0, 0, [], method=f"every layer executed ({layers} layers)")

    monkeypatch.setattr(depth, "run_dry", fake_run)
    monkeypatch.setattr(depth, "survey", lambda spec: pytest.fail("no survey"))
    assert plan_dry(QWEN_05B, full_depth=True).method == (
        "every layer executed (24 layers): --full-depth"
    )
    shallow = {**QWEN_05B.model_config, "num_hidden_layers": DEPTHS[-1]}
    report = plan_dry(dataclasses.replace(QWEN_05B, model_config=shallow))
    assert report.method == "every layer executed (5 layers)"
    assert ran == [24, 5]


def test_at_depth_cuts_per_layer_lists_and_only_the_text_layers():
    config = {
        **model_config("Qwen2.5-0.5B"),
        "layer_types": ["full_attention"] * 24,
        "max_window_layers": 21,
    }
    cut = at_depth(config, 3)
    assert (cut["num_hidden_layers"], cut["layer_types"], cut["max_window_layers"]) == (
        3,
        ["full_attention"] * 3,
        3,
    )
    assert config["num_hidden_layers"] == 24  # not modified in place
    vl = {"model_type": "qwen2_5_vl", "text_config": config, "vision_config": {"depth": 32}}
    cut = at_depth(vl, 4)
    assert cut["text_config"]["num_hidden_layers"] == 4
    assert cut["vision_config"] == {"depth": 32}  # the vision tower keeps its depth


def test_config_difference_names_the_differing_list():
    uniform = {**model_config("Qwen2.5-0.5B"), "layer_types": ["full_attention"] * 24}
    assert config_difference(uniform) is None
    hybrid = {**uniform, "layer_types": ["sliding_attention"] + ["full_attention"] * 23}
    assert "layer_types" in config_difference(hybrid)


def test_moe_every_other_layer_is_a_model_difference():
    """Qwen2-MoE with a dense MLP on some layers (`mlp_only_layers`): the per-layer lists do not
    say so, the built layers do."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        "qwen2_moe",
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        mlp_only_layers=[1, 3, 5],
    )
    assert config_difference(config.to_dict()) is None
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert (
        model_difference(model, 6) == "decoder layer 1 differs from layer 0 (Qwen2MoeDecoderLayer)"
    )
    config.mlp_only_layers = []
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert model_difference(model, 6) is None


def _report(depth: int, update_peak: int) -> DryRunReport:
    spec = dataclasses.replace(
        QWEN_05B, model_config={**QWEN_05B.model_config, "num_hidden_layers": depth}
    )
    phases = [
        PhaseResult("update_actor", update_peak, 10 * depth, depth, 7, 3, 2, depth),
        # The sync's peak is not affine in depth (bucket fill); its start is.
        PhaseResult(
            "weight_sync",
            40 + depth + {3: 7, 4: 12, 5: 10}[depth],
            0,
            4 * depth,
            0,
            9,
            9,
            40 + depth,
        ),
    ]
    return DryRunReport(spec, 100 + depth, 20 + depth, phases)


def test_a_figure_off_its_line_is_refused():
    survey = Survey(124, 0, None, 10, 96, 9, 9)
    check = Survey(105, 0, None, 10, 20, 9, 9)
    on_line = [_report(d, 1000 + 5 * d) for d in DEPTHS]
    report = extrapolate(QWEN_05B, on_line, check, survey)
    assert report.phase("update_actor").peak_bytes == 1000 + 5 * 24
    assert report.phase("weight_sync").peak_bytes == 40 + 24 + 10  # start + the full stream's
    assert report.parameters == 124 and report.static_bytes == 44
    off = [*on_line[:2], _report(DEPTHS[2], 1000 + 5 * DEPTHS[2] + 1)]
    with pytest.raises(OffTheLine, match="update_actor peak_bytes is 1026 at 5 layers"):
        extrapolate(QWEN_05B, off, check, survey)
    with pytest.raises(OffTheLine, match="the full-depth model has 125"):
        extrapolate(QWEN_05B, on_line, check, dataclasses.replace(survey, parameters=125))


@pytest.mark.runtime
def test_a_vl_model_extrapolates_its_text_layers_only():
    """A tiny Qwen2.5-VL with 6 text layers and a 2-block vision tower: the text layers are cut to
    3/4/5, the tower keeps its blocks; the figures equal every layer executed."""
    from kuberl_runtime.testing.tiny_vl import build_tiny_vl_config, build_tiny_vl_processor

    tokenizer = build_tiny_vl_processor().tokenizer
    config = build_tiny_vl_config(tokenizer, num_layers=6, hidden=128, vision_depth=2)
    # Rows long enough that the update peaks in the backward at every depth: at 32 + 32 tokens
    # it moves to the optimizer step at 5 layers (the max of two lines is not one line), and
    # the check falls back to executing every layer.
    spec = DryRunInput(
        model_config=config.to_dict(),
        world_size=2,
        prompt_length=128,
        response_length=128,
        micro_batch_rows=2,
        log_prob_micro_batch_rows=2,
    )
    extrapolated = plan_dry(spec)
    assert extrapolated.method == "measured at 3/4/5 layers, extrapolated to 6; 5-layer check exact"
    full = run_dry(spec)
    assert extrapolated.vision_parameters == full.vision_parameters > 0
    assert (extrapolated.parameters, extrapolated.static_bytes) == (
        full.parameters,
        full.static_bytes,
    )
    for mine, theirs in zip(extrapolated.phases, full.phases, strict=True):
        assert mine == theirs, mine.name
