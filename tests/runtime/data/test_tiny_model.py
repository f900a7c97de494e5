from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2ForCausalLM

from kuberl_runtime.testing.tiny import build_tiny_qwen2, save_tiny_model


def test_forward_gives_logits_over_the_tokenizer_vocab(tokenizer) -> None:
    model = build_tiny_qwen2(tokenizer, num_layers=2, hidden=64)
    assert isinstance(model, Qwen2ForCausalLM)
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 64
    ids = torch.tensor([tokenizer("1 + 2 = 3", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], len(tokenizer))
    assert torch.isfinite(logits).all()


def test_same_seed_same_weights_and_global_rng_untouched(tokenizer) -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a = build_tiny_qwen2(tokenizer, seed=1)
    assert torch.equal(torch.rand(1), expected_next)
    b = build_tiny_qwen2(tokenizer, seed=1)
    c = build_tiny_qwen2(tokenizer, seed=2)
    weight = "model.layers.0.mlp.up_proj.weight"
    assert torch.equal(a.state_dict()[weight], b.state_dict()[weight])
    assert not torch.equal(a.state_dict()[weight], c.state_dict()[weight])


def test_saved_dir_reloads_with_same_outputs(tokenizer, tmp_path: Path) -> None:
    out = save_tiny_model(tmp_path / "tiny", tokenizer, seed=3)
    reloaded = AutoModelForCausalLM.from_pretrained(out)
    assert AutoTokenizer.from_pretrained(out).get_vocab() == tokenizer.get_vocab()
    ids = torch.tensor([[1, 5, 9, 2]])
    with torch.no_grad():
        expected = build_tiny_qwen2(tokenizer, seed=3)(input_ids=ids).logits
        assert torch.allclose(reloaded(input_ids=ids).logits, expected)
    assert reloaded.generation_config.eos_token_id == tokenizer.eos_token_id
