"""`model.lora_adapter_path`: training starts from the saved adapter, not a fresh one."""

from __future__ import annotations

import pytest
import torch

from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm


def _lora_weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items() if "lora_" in k}


def test_build_starts_from_the_saved_adapter(tiny_model_path, tmp_path) -> None:
    spec = ModelSpec(path=str(tiny_model_path), lora_rank=4, lora_alpha=8)
    torch.manual_seed(1)
    trained = build_causal_lm(spec)
    with torch.no_grad():
        for name, param in trained.named_parameters():
            if "lora_B" in name:  # a fresh adapter has B = 0; a trained one does not
                param.normal_()
    trained.save_pretrained(tmp_path / "adapter")

    torch.manual_seed(2)
    fresh = build_causal_lm(spec)
    resumed = build_causal_lm(
        ModelSpec(**{**spec.__dict__, "lora_adapter_path": str(tmp_path / "adapter")})
    )
    saved, got = _lora_weights(trained), _lora_weights(resumed)
    assert saved.keys() == got.keys() and saved
    assert all(torch.equal(saved[k], got[k]) for k in saved)
    assert any(not torch.equal(saved[k], v) for k, v in _lora_weights(fresh).items())
    trainable = [n for n, p in resumed.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)


def test_adapter_of_another_rank_is_refused_with_the_fix(tiny_model_path, tmp_path) -> None:
    spec = ModelSpec(path=str(tiny_model_path), lora_rank=4, lora_alpha=8)
    build_causal_lm(spec).save_pretrained(tmp_path / "adapter")
    other = ModelSpec(
        path=str(tiny_model_path),
        lora_rank=8,
        lora_alpha=8,
        lora_adapter_path=str(tmp_path / "adapter"),
    )
    with pytest.raises(ValueError, match=r"set model\.lora_rank=4 and model\.lora_alpha=8"):
        build_causal_lm(other)
