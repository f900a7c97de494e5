"""Next-token choice: temperature, top-k, top-p, greedy — with one random stream per row.

Each row draws its Gumbel noise from its own generator seeded by the trainer, so a row's sample
does not depend on which rank generated it or which rows shared its batch. Sampling runs on the
logits' device in their dtype, widened to fp32 at least: a bf16 Gumbel-max would quantise the
noise and the logits to 8 bits of mantissa and bias the distribution (vLLM samples in fp32 too).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from kuberl_runtime.rollout.base import SamplingParams


def row_generators(
    seeds: Sequence[int], device: torch.device | str = "cpu"
) -> list[torch.Generator]:
    """One stream per row, on the device that samples (the logits' device)."""
    return [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]


def filter_logits(logits: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Set logits outside the top-k / nucleus (top-p) to −inf; k ≤ 0 and p = 1 disable them."""
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        # Drop a token when the tokens before it already cover top_p (the first always stays).
        drop_sorted = (cumulative - sorted_logits.softmax(-1)) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def processed_log_probs(
    logits: torch.Tensor, tokens: torch.Tensor, params: SamplingParams
) -> torch.Tensor:
    """(rows,) fp32 log-probs of the chosen `tokens` under the distribution they were drawn from:
    vLLM's `processed_logprobs` (verl's `rollout.logprobs_mode`): the logits over temperature,
    top-k / top-p applied, log-softmax; greedy: the plain log-softmax."""
    dtype = torch.promote_types(logits.dtype, torch.float32)
    processed = logits.to(dtype)
    if not params.greedy:
        processed = filter_logits(processed / params.temperature, params.top_k, params.top_p)
    log_probs = processed.log_softmax(-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return log_probs.float()


def sample_next(
    logits: torch.Tensor, params: SamplingParams, generators: list[torch.Generator]
) -> torch.Tensor:
    """(rows, V) logits → (rows,) token ids, on the logits' device (no host round trip)."""
    if params.greedy:
        return logits.argmax(-1)
    dtype = torch.promote_types(logits.dtype, torch.float32)
    scaled = filter_logits(logits.to(dtype) / params.temperature, params.top_k, params.top_p)
    uniform = torch.stack(
        [
            torch.rand(logits.shape[-1], generator=g, dtype=dtype, device=logits.device)
            for g in generators
        ]
    ).clamp_(min=torch.finfo(dtype).tiny)  # rand is in [0, 1): only 0 needs a guard
    gumbel = -torch.log(-torch.log(uniform))
    return (scaled + gumbel).argmax(-1)
