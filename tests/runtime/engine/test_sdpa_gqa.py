"""`sdpa` resolves to SDPA reading grouped KV heads in place on the CPU (engine/sdpa_gqa.py): the
same outputs and gradients as transformers' `sdpa`, for grouped and plain heads, padded and
packed (block-diagonal) masks; the model's config reports the kernel it runs."""

from __future__ import annotations

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from kuberl_runtime.engine import sdpa_gqa
from kuberl_runtime.engine.logprob import forward_responses
from kuberl_runtime.engine.model_builder import ModelSpec, attn_implementation, build_causal_lm
from kuberl_runtime.testing.tiny import save_tiny_model
from tests.runtime.engine.conftest import fixed_batch


class _Heads(torch.nn.Module):
    def __init__(self, groups: int) -> None:
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = True


def _padded_mask(rows: int, length: int) -> torch.Tensor:
    """Left padding of 0..rows-1 tokens, causal: (rows, 1, T, T) bool as transformers builds."""
    keys = torch.arange(length)[None, :] >= torch.arange(rows)[:, None]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    return (keys[:, None, None, :] & causal).contiguous()


def _packed_mask(lengths: list[int]) -> torch.Tensor:
    """One packed row of sequences: causal within each, (1, 1, T, T) bool."""
    segment = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    same = segment[:, None] == segment[None, :]
    causal = torch.ones(len(segment), len(segment), dtype=torch.bool).tril()
    return (same & causal)[None, None]


@pytest.mark.parametrize("kv_heads", [2, 4])  # grouped-query and plain multi-head attention
@pytest.mark.parametrize("layout", ["padded", "packed", "float", "none"])
def test_outputs_and_gradients_equal_transformers_sdpa(kv_heads, layout):
    heads, dim = 4, 16
    if layout == "packed":
        rows, length, mask = 1, 11, _packed_mask([4, 5, 2])
    else:
        rows, length = 3, 9
        mask = _padded_mask(rows, length) if layout != "none" else None
    if layout == "float":
        mask = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    gen = torch.Generator().manual_seed(0)
    inputs = [torch.randn(rows, h, length, dim, generator=gen) for h in (heads, kv_heads, kv_heads)]
    module = _Heads(heads // kv_heads)
    # The in-place read is what is compared wherever transformers would repeat the heads.
    assert sdpa_gqa._reads_heads_in_place(module, inputs[0], mask, {}) == (
        kv_heads < heads and mask is not None
    )
    results = []
    for attention in (sdpa_attention_forward, sdpa_gqa.sdpa_gqa_attention):
        leaves = [t.clone().requires_grad_() for t in inputs]
        out, _ = attention(module, *leaves, mask, scaling=dim**-0.5)
        out.backward(torch.ones_like(out))
        results.append((out.detach(), [t.grad for t in leaves]))
    (stock, stock_grads), (ours, our_grads) = results
    assert ours.shape == stock.shape == (rows, length, heads, dim)
    torch.testing.assert_close(ours, stock, rtol=1e-5, atol=1e-6)
    for mine, theirs in zip(our_grads, stock_grads, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)


def test_sdpa_resolves_to_it_and_the_config_reports_it(tiny_model_path):
    default = ModelSpec(path=str(tiny_model_path))
    assert attn_implementation(default) == sdpa_gqa.SDPA_GQA  # no flash-attn in this environment
    model = build_causal_lm(default)
    assert model.config._attn_implementation == sdpa_gqa.SDPA_GQA
    assert model.model.layers[0].self_attn.config._attn_implementation == sdpa_gqa.SDPA_GQA
    explicit = ModelSpec(path=str(tiny_model_path), override_config={"attn_implementation": "sdpa"})
    assert attn_implementation(explicit) == "sdpa"  # a user's explicit choice is kept


@pytest.mark.parametrize("use_remove_padding", [False, True])
def test_grouped_query_model_log_probs_and_gradients_equal_sdpa(
    tmp_path, tokenizer, use_remove_padding
):
    path = save_tiny_model(tmp_path / "gqa", tokenizer, seed=0, num_heads=4, num_kv_heads=2)
    batch = fixed_batch(tokenizer).tensors
    mask = batch["response_mask"]
    results = []
    for kernel in ("sdpa", None):
        override = {"attn_implementation": kernel} if kernel else {}
        torch.manual_seed(0)
        model = build_causal_lm(ModelSpec(path=str(path), override_config=override))
        assert model.config.num_key_value_heads < model.config.num_attention_heads
        out = forward_responses(
            model, batch, calculate_entropy=True, use_remove_padding=use_remove_padding
        )
        (out.log_probs * mask).sum().backward()
        grads = {n: p.grad for n, p in model.named_parameters()}
        results.append((out.log_probs.detach(), out.entropy.detach(), grads))
    (lp, ent, grads), (our_lp, our_ent, our_grads) = results
    torch.testing.assert_close(our_lp, lp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(our_ent, ent, rtol=1e-5, atol=1e-5)
    for name, grad in grads.items():
        torch.testing.assert_close(our_grads[name], grad, rtol=1e-4, atol=1e-5, msg=name)
