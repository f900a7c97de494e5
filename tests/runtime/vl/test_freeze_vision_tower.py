"""actor.freeze_vision_tower: the vision encoder has no trainable parameter and the optimizer holds
none of it; the language model stays trainable. Without it everything trains."""

from __future__ import annotations

import pytest

from kuberl_api.plan.sections import OptimPlan
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm, vision_tower
from kuberl_runtime.engine.optim import build_optimizer


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from kuberl_runtime.testing.tiny_vl import save_tiny_vl

    return str(save_tiny_vl(tmp_path_factory.mktemp("tiny-vl")))


def _optimised(model) -> set[int]:
    optim = OptimPlan.model_construct(
        lr=1e-3, betas=[0.9, 0.999], weight_decay=0.0, optimizer="AdamW"
    )
    return {id(p) for group in build_optimizer(model, optim).param_groups for p in group["params"]}


@pytest.mark.parametrize("freeze", [True, False])
def test_the_vision_tower_is_frozen_only_when_asked(model_dir, freeze):
    model = build_causal_lm(ModelSpec(path=model_dir, freeze_vision_tower=freeze))
    assert type(model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    tower = {id(p) for p in vision_tower(model).parameters()}
    optimised = _optimised(model)
    assert tower
    assert (tower & optimised == set()) is freeze
    assert tower <= optimised or freeze
    language = {id(p) for p in model.model.language_model.parameters()}
    assert language <= optimised


def test_freezing_a_text_model_names_the_key(tmp_path):
    from transformers import AutoTokenizer

    from kuberl_runtime.testing.tiny import save_tiny_model
    from kuberl_runtime.testing.tiny_vl import ARITH_TOKENIZER

    path = save_tiny_model(tmp_path / "text", AutoTokenizer.from_pretrained(ARITH_TOKENIZER))
    with pytest.raises(ValueError, match="freeze_vision_tower=True but the model has no vision"):
        build_causal_lm(ModelSpec(path=str(path), freeze_vision_tower=True))
