"""Sampling filters, per-row random streams and verl's response layout."""

from __future__ import annotations

import math

import torch

from kuberl_runtime.rollout.base import SamplingParams, build_response_batch
from kuberl_runtime.rollout.sampling import filter_logits, row_generators, sample_next


def test_top_k_keeps_the_k_largest():
    logits = torch.tensor([[1.0, 4.0, 3.0, 2.0]])
    kept = filter_logits(logits, top_k=2, top_p=1.0)
    assert torch.isfinite(kept).tolist() == [[False, True, True, False]]


def test_top_p_keeps_the_smallest_prefix_covering_p():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    kept = filter_logits(probs.log(), top_k=-1, top_p=0.7)
    assert torch.isfinite(kept).tolist() == [[True, True, False, False]]
    first_only = filter_logits(probs.log(), top_k=-1, top_p=0.1)
    assert torch.isfinite(first_only).tolist() == [[True, False, False, False]]


def test_greedy_takes_the_argmax():
    logits = torch.tensor([[0.1, 2.0, 0.3], [5.0, 0.0, 1.0]])
    tokens = sample_next(logits, SamplingParams(response_length=1, do_sample=False), [])
    assert tokens.tolist() == [1, 0]


def test_a_row_samples_the_same_whatever_its_batch():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    params = SamplingParams(response_length=1, temperature=0.7, top_p=0.9)
    together = sample_next(logits, params, row_generators([11, 12, 13]))
    alone = sample_next(logits[1:2], params, row_generators([12]))
    assert together[1] == alone[0]


def test_sampling_follows_the_softmax():
    logits = torch.tensor([[0.0, math.log(3.0)]])
    params = SamplingParams(response_length=1)
    draws = [int(sample_next(logits, params, row_generators([s]))[0]) for s in range(2000)]
    assert abs(sum(draws) / len(draws) - 0.75) < 0.04


def test_response_mask_includes_the_first_eos_and_positions_continue():
    prompts = torch.tensor([[0, 5, 6]])
    prompt_mask = torch.tensor([[0, 1, 1]])
    responses = torch.tensor([[7, 2, 8, 2]])  # eos = 2
    batch = build_response_batch(prompts, prompt_mask, responses, eos_ids=[2], pad_id=0)
    assert batch["response_mask"].tolist() == [[1, 1, 0, 0]]
    assert batch["responses"].tolist() == [[7, 2, 0, 0]]
    assert batch["position_ids"].tolist() == [[0, 0, 1, 2, 3, 4, 5]]
    assert batch["attention_mask"].tolist() == [[0, 1, 1, 1, 1, 0, 0]]


def _chi_square(tokens: torch.Tensor, probs: torch.Tensor) -> float:
    counts = torch.bincount(tokens, minlength=probs.numel()).double()
    expected = probs.double() * tokens.numel()
    kept = expected > 0
    assert counts[~kept].sum() == 0  # nothing outside the filtered support
    return float(((counts[kept] - expected[kept]) ** 2 / expected[kept]).sum())


def test_sampled_tokens_follow_the_filtered_softmax_in_fp32_and_from_bf16_logits():
    """Many rows (one stream each) sampling the same logits: the token frequencies pass a
    chi-square test against softmax(filtered logits / temperature), for fp32 logits and for bf16
    logits (sampled in fp32 from the bf16 values)."""
    vocab, rows = 12, 6000
    base = torch.randn(vocab, generator=torch.Generator().manual_seed(1)) * 2
    params = SamplingParams(response_length=1, temperature=0.8, top_k=9, top_p=0.95)
    for dtype in (torch.float32, torch.bfloat16):
        logits = base.to(dtype).expand(rows, vocab).contiguous()
        tokens = sample_next(logits, params, row_generators(range(rows)))
        want = filter_logits(logits[:1].float() / params.temperature, 9, 0.95).softmax(-1)[0]
        # 99.99th percentile of chi-square with at most 8 degrees of freedom: 31.8
        assert _chi_square(tokens, want) < 31.8, dtype
