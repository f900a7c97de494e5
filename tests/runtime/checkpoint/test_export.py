"""The merged export is a plain Hugging Face model that computes what the trained policy did."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from kuberl_runtime.checkpoint.export import export_hf_model
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm
from kuberl_runtime.testing.tiny import save_tiny_model
from tests.runtime.engine.conftest import TOKENIZER_DIR


def test_lora_adapters_are_folded_into_the_exported_weights(tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    base = save_tiny_model(tmp_path / "base", tokenizer)
    model = build_causal_lm(ModelSpec(path=str(base), lora_rank=4, lora_alpha=8))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    ids = torch.randint(3, len(tokenizer), (2, 9), generator=torch.Generator().manual_seed(0))
    expected = model(input_ids=ids).logits
    target = export_hf_model(model, tokenizer, tmp_path / "merged")
    merged = AutoModelForCausalLM.from_pretrained(target)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    torch.testing.assert_close(merged(input_ids=ids).logits, expected, atol=1e-5, rtol=1e-5)
    assert (target / "tokenizer.json").is_file()
