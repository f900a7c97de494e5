"""The attention kernel really applied, packed == padded under it, chunked log-probs exact."""

from __future__ import annotations

import pytest
import torch

from kuberl_runtime.engine.logprob import forward_responses, token_log_probs
from kuberl_runtime.engine.model_builder import (
    ModelSpec,
    attn_implementation,
    build_causal_lm,
    build_causal_lm_empty,
)
from tests.runtime.engine.conftest import fixed_batch


@pytest.mark.parametrize("override", [None, "eager", "sdpa"])
def test_attn_implementation_reaches_the_model(tiny_model_path, override):
    spec = ModelSpec(
        path=str(tiny_model_path),
        override_config={"attn_implementation": override} if override else {},
        enable_gradient_checkpointing=True,
    )
    expected = override or "sdpa"  # no flash-attn in the CPU test environment
    assert attn_implementation(spec) == expected
    for model in (build_causal_lm(spec), build_causal_lm_empty(spec)):
        assert model.config._attn_implementation == expected
        assert model.model.layers[0].self_attn.config._attn_implementation == expected
        assert model.is_gradient_checkpointing  # transformers 5.19's API (vLLM's cap)
    assert next(build_causal_lm_empty(spec).parameters()).device.type == "meta"


@pytest.mark.parametrize("override", ["eager", "sdpa"])
def test_packed_and_padded_forwards_agree(tiny_model_path, tokenizer, override):
    spec = ModelSpec(path=str(tiny_model_path), override_config={"attn_implementation": override})
    model = build_causal_lm(spec).eval()
    batch = fixed_batch(tokenizer).tensors
    with torch.no_grad():
        padded = forward_responses(model, batch, temperature=0.7, calculate_entropy=True)
        packed = forward_responses(
            model, batch, temperature=0.7, calculate_entropy=True, use_remove_padding=True
        )
    mask = batch["response_mask"].bool()
    torch.testing.assert_close(packed.log_probs[mask], padded.log_probs[mask], atol=1e-5, rtol=0)
    torch.testing.assert_close(packed.entropy[mask], padded.entropy[mask], atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_chunked_log_probs_match_log_softmax_in_value_and_gradient(dtype):
    gen = torch.Generator().manual_seed(0)
    logits = (torch.randn(37, 11, 50, generator=gen) * 3).to(dtype).requires_grad_()
    labels = torch.randint(0, 50, (37, 11), generator=gen)
    weights = torch.randn(37, 11, generator=gen)
    ours = token_log_probs(logits, labels, chunk_rows=16)
    (ours * weights).sum().backward()
    grad, logits.grad = logits.grad.clone(), None
    reference = torch.log_softmax(logits.float(), -1).gather(-1, labels[..., None])[..., 0]
    (reference * weights).sum().backward()
    assert ours.dtype == torch.float32 and grad.dtype == dtype
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=0)
    tol = 1e-6 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(grad.float(), logits.grad.float(), atol=tol, rtol=0)


def test_log_prob_memory_stays_within_a_chunk_of_fp32():
    """No [tokens, vocab] fp32 tensor: the largest fp32 allocation is one chunk's."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Largest(TorchDispatchMode):
        biggest_fp32 = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
                    self.biggest_fp32 = max(self.biggest_fp32, t.numel())
            return out

    tokens, vocab, chunk = 16384, 152064, 1024
    with FakeTensorMode():
        logits = torch.empty(tokens, vocab, dtype=torch.bfloat16, requires_grad=True)
        labels = torch.zeros(tokens, dtype=torch.long)
        with Largest() as probe:
            token_log_probs(logits, labels, chunk_rows=chunk).sum().backward()
    assert probe.biggest_fp32 == chunk * vocab  # vs tokens × vocab before (10 GB at 16k tokens)
