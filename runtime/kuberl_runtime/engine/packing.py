"""Cutting a rank's rows into micro-batches: fixed size, or by token budget (`use_dynamic_bsz`).

Token-budget splitting makes k = ⌈Σ tokens / budget⌉ micro-batches (the same k on every rank, so
FSDP's collectives line up) and spreads rows over them longest-first onto the lightest bin.
"""

from __future__ import annotations

import math

import torch

from kuberl_runtime.distributed import all_reduce_max


def fixed_micro_batches(num_rows: int, micro_batch_size: int) -> list[list[int]]:
    return [
        list(range(start, min(start + micro_batch_size, num_rows)))
        for start in range(0, num_rows, micro_batch_size)
    ]


def token_budget_micro_batches(
    attention_mask: torch.Tensor, max_tokens: int, *, same_count_on_all_ranks: bool = True
) -> list[list[int]]:
    """Rows grouped so each group's valid tokens stay near `max_tokens` (ascending inside)."""
    seq_len = attention_mask.shape[1]
    if max_tokens < seq_len:
        raise ValueError(
            f"ppo_max_token_len_per_gpu / log_prob_max_token_len_per_gpu = {max_tokens} is smaller "
            f"than one padded sequence ({seq_len} = prompt_length + response_length); raise it"
        )
    lengths = attention_mask.sum(-1).tolist()
    num_rows = len(lengths)
    count = min(num_rows, max(1, math.ceil(sum(lengths) / max_tokens)))
    if same_count_on_all_ranks:
        count = min(num_rows, all_reduce_max(count))
    bins: list[list[int]] = [[] for _ in range(count)]
    loads = [0] * count
    for row in sorted(range(num_rows), key=lambda r: (-lengths[r], r)):
        target = min(range(count), key=lambda b: (loads[b], b))
        bins[target].append(row)
        loads[target] += lengths[row]
    return [sorted(rows) for rows in bins if rows]
