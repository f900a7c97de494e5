"""A vision-language model in the dry run (tiny Qwen2.5-VL, built from its config by the runtime's
model_builder path): the vision encoder's parameters are counted, and its AdamW state is resident
unless `freeze_vision_tower`. Ulysses SP with it runs, in the runtime and here:
test_vision_sequence_parallel.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch.distributed as dist

from kuberl_runtime.dryrun import DryRunInput, format_report, run_dry
from kuberl_runtime.testing.tiny_vl import build_tiny_vl_config, build_tiny_vl_processor

pytestmark = pytest.mark.skipif(dist.is_initialized(), reason="needs a process without a group")


@pytest.fixture(scope="module")
def spec() -> DryRunInput:
    tokenizer = build_tiny_vl_processor().tokenizer
    config = build_tiny_vl_config(tokenizer, hidden=128, vision_hidden=64, vision_depth=4)
    return DryRunInput(
        model_config=config.to_dict(),
        world_size=2,
        prompt_length=64,
        response_length=64,
        micro_batch_rows=2,
        log_prob_micro_batch_rows=2,
    )


@pytest.fixture(scope="module")
def reports(spec):
    frozen = dataclasses.replace(spec, freeze_vision_tower=True)
    return {"trained": run_dry(spec), "frozen": run_dry(frozen)}


def test_the_vision_encoder_is_counted(reports, spec):
    trained = reports["trained"]
    vision = spec.model_config["vision_config"]
    per_block = 4 * vision["hidden_size"] ** 2  # q, k, v, proj: a lower bound on a block
    assert trained.vision_parameters > vision["depth"] * per_block
    assert trained.parameters > trained.vision_parameters
    assert reports["frozen"].vision_parameters == trained.vision_parameters
    text = format_report(trained)
    assert f"vision encoder {trained.vision_parameters / 1e9:.2f}B of those parameters" in text


def test_its_adamw_state_is_resident_unless_frozen(reports, spec):
    """Two fp32 moments per vision parameter, sharded over the world."""
    trained, frozen = reports["trained"], reports["frozen"]
    state = 2 * 4 * trained.vision_parameters / spec.world_size
    assert trained.static_bytes - frozen.static_bytes == pytest.approx(state, rel=0.02)
    assert "(frozen: no optimizer state)" in format_report(frozen)
