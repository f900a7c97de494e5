"""On a CUDA GPU: packed forwards run torch's flash varlen kernel and equal padded SDPA ones.

Runs only on a GPU machine (`make test-gpu`); CI has none and never collects tests/gpu.
"""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from kuberl_runtime.engine.logprob import LOGPROB_CHUNK_ROWS, forward_responses, token_log_probs
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm
from kuberl_runtime.engine.varlen import TORCH_VARLEN

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda")
PROMPT, RESPONSE, ROWS = 96, 48, 6


def _model_dir(tmp_path):
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=1024,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    Qwen2ForCausalLM(config).save_pretrained(tmp_path)
    return str(tmp_path)


def _batch() -> dict[str, torch.Tensor]:
    """Left-padded prompts and right-padded responses of different lengths, as rollouts are."""
    g = torch.Generator().manual_seed(1)
    prompt_len = torch.randint(8, PROMPT + 1, (ROWS,), generator=g)
    response_len = torch.randint(1, RESPONSE + 1, (ROWS,), generator=g)
    prompt_mask = torch.arange(PROMPT)[None] >= (PROMPT - prompt_len)[:, None]
    response_mask = torch.arange(RESPONSE)[None] < response_len[:, None]
    mask = torch.cat([prompt_mask, response_mask], 1).long()
    ids = torch.randint(0, 1024, (ROWS, PROMPT + RESPONSE), generator=g) * mask
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": (mask.cumsum(-1) - 1).clamp(min=0),
        "responses": ids[:, PROMPT:],
        "response_mask": response_mask.long(),
    }


def _log_probs(model, batch, packed):
    out = forward_responses(model, batch, use_remove_padding=packed, calculate_entropy=True)
    return out.log_probs, out.entropy


def test_packed_varlen_equals_padded_sdpa_forward_and_backward(tmp_path):
    path = _model_dir(tmp_path)
    varlen = build_causal_lm(ModelSpec(path, native_varlen=True), torch.bfloat16).to(CUDA)
    sdpa = build_causal_lm(ModelSpec(path), torch.bfloat16).to(CUDA)
    reference = build_causal_lm(ModelSpec(path), torch.float32).to(CUDA)
    assert varlen.config._attn_implementation == TORCH_VARLEN
    assert sdpa.config._attn_implementation == "sdpa"
    batch = {k: v.to(CUDA) for k, v in _batch().items()}
    mask = batch["response_mask"].bool()

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        packed, packed_entropy = _log_probs(varlen, batch, packed=True)
        (-(packed * mask).sum()).backward()
    kernels = {e.name for e in prof.events()}
    assert any("flash" in name.lower() for name in kernels), sorted(kernels)[:40]

    padded, padded_entropy = _log_probs(sdpa, batch, packed=False)
    (-(padded * mask).sum()).backward()
    exact, _ = _log_probs(reference, batch, packed=False)

    def err(x):
        return (x.float() - exact.float())[mask].abs().mean().item()

    # bf16 both ways: the varlen kernel is no further from fp32 than padded SDPA is.
    assert err(packed) <= 2 * err(padded) + 1e-3, (err(packed), err(padded))
    assert (packed - padded)[mask].abs().max().item() < 0.5
    assert (packed_entropy - padded_entropy)[mask].abs().mean().item() < 0.05
    for (name, a), (_, b) in zip(varlen.named_parameters(), sdpa.named_parameters(), strict=True):
        rel = (a.grad.float() - b.grad.float()).norm() / b.grad.float().norm().clamp(min=1e-12)
        assert rel < 0.05, (name, rel.item())


def test_chunked_log_probs_never_hold_fp32_vocab_logits():
    """Qwen2.5-7B's vocabulary, 8k response tokens: forward + backward stay near the bf16 logits."""
    tokens, vocab = 8192, 152064
    g = torch.Generator(device=CUDA).manual_seed(0)
    logits = torch.randn(tokens, vocab, device=CUDA, dtype=torch.bfloat16, generator=g)
    logits.requires_grad_(True)
    labels = torch.randint(0, vocab, (tokens,), device=CUDA, generator=g)
    size = logits.numel() * logits.element_size()

    def peak_over_baseline(fn) -> int:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        torch.cuda.synchronize()
        logits.grad = None
        return torch.cuda.max_memory_allocated() - base

    def chunked():
        token_log_probs(logits, labels).sum().backward()

    def naive():
        logits.float().log_softmax(-1).gather(-1, labels[:, None]).sum().backward()

    ours, plain = peak_over_baseline(chunked), peak_over_baseline(naive)
    print(
        f"log-prob peak over the logits: chunked {ours / 2**30:.2f} GiB, "
        f"fp32 log_softmax {plain / 2**30:.2f} GiB (bf16 logits {size / 2**30:.2f} GiB)"
    )
    # The gradient (bf16, the logits' size) plus a few fp32 temporaries of one chunk of rows.
    chunk = LOGPROB_CHUNK_ROWS * vocab * 4
    assert ours <= size + 4 * chunk, ours
    assert plain >= 3 * size, plain
    exact = logits.float().log_softmax(-1).gather(-1, labels[:, None]).squeeze(-1)
    assert torch.allclose(token_log_probs(logits, labels), exact, atol=1e-3)
