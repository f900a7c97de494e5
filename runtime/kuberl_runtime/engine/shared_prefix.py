"""Padded policy forwards run each distinct prompt once: GRPO's n samples share its prefix.

A padded batch holds every prompt n times (`rollout.n` samples of it), so a plain forward runs
the prompt columns n times over (at 128-token responses to ~50-token prompts, about a quarter of
the forward and backward work is prompt columns). Here the rows with the same prompt (ids, mask
and positions alike) run their prompt once, keeping its keys and values (a transformers
`DynamicCache`, gradients flowing through it), and each row then runs only its response columns
against its prompt's cache: the same attention, the same log-probs and gradients as the plain
forward (to fp32 rounding), with the prompt's share of the work divided by n. The log-prob of
response token 0 comes from the prompt's last position, the rest from the response columns,
which run only as far as the rows' responses go (rows that ended early in a group of their own).

Not used (the plain forward runs) where no prompt repeats, where a model checkpoints activations
while training (transformers then drops the cache), for value heads and vision-language inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import DynamicCache


def prompt_groups(
    inputs: dict[str, torch.Tensor], response_length: int
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(one row of each distinct prompt, each row's index among those), or None if every prompt
    is distinct. A prompt is its columns before the responses: ids, mask and positions."""
    prompt = inputs["input_ids"].shape[1] - response_length
    if prompt < 1 or response_length < 2:
        return None
    key = torch.cat(
        [inputs[name][:, :prompt] for name in ("input_ids", "attention_mask", "position_ids")], 1
    )
    distinct, inverse = torch.unique(key, dim=0, return_inverse=True)
    if distinct.shape[0] == key.shape[0]:
        return None
    rows = torch.arange(key.shape[0], device=key.device)
    first = torch.full((distinct.shape[0],), key.shape[0], dtype=torch.long, device=key.device)
    return first.scatter_reduce(0, inverse, rows, reduce="amin"), inverse


def shares_prefix(model: nn.Module) -> bool:
    """Whether the model keeps a cache through this forward (not while checkpointing a layer)."""
    return not (model.training and getattr(model, "is_gradient_checkpointing", False))


@dataclass(frozen=True)
class LogitsPart:
    """Logits (rows of `rows`, width, vocab) predicting response tokens `first_column` onwards."""

    rows: torch.Tensor
    first_column: int
    logits: torch.Tensor


def shared_prefix_logits(
    model: nn.Module,
    inputs: dict[str, torch.Tensor],
    response_length: int,
    first: torch.Tensor,
    inverse: torch.Tensor,
) -> list[LogitsPart]:
    """The logits at the positions that predict each response token, in parts: the prompt's last
    position (response token 0, every row), then each group's response columns but the last.

    Response columns run in up to two groups of rows cut by length, each only as wide as its
    longest response (a row that ended early runs no columns past its end); response tokens no
    part covers are padding (masked everywhere). No (rows, response_length, vocab) tensor is
    assembled: each part's logits are all the memory they take, as in the plain forward."""
    prompt = inputs["input_ids"].shape[1] - response_length
    cache = DynamicCache(config=model.config)
    head = model(
        input_ids=inputs["input_ids"][first, :prompt],
        attention_mask=inputs["attention_mask"][first, :prompt],
        position_ids=inputs["position_ids"][first, :prompt],
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    ).logits
    every_row = torch.arange(inputs["input_ids"].shape[0], device=head.device)
    parts = [LogitsPart(every_row, 0, head[inverse])]
    prompt_kv = [(layer.keys, layer.values) for layer in cache.layers]
    for group, width in _length_groups(_columns_needed(inputs["attention_mask"][:, prompt:])):
        group_cache = DynamicCache(
            ddp_cache_data=[(k[inverse[group]], v[inverse[group]]) for k, v in prompt_kv],
            config=model.config,
        )
        end = prompt + width
        logits = model(
            input_ids=inputs["input_ids"][group, prompt:end],
            attention_mask=inputs["attention_mask"][group, :end],
            position_ids=inputs["position_ids"][group, prompt:end],
            past_key_values=group_cache,
            use_cache=True,
        ).logits
        parts.append(LogitsPart(group, 1, logits))
    return parts


def _columns_needed(response_attention: torch.Tensor) -> torch.Tensor:
    """Per row, the response columns whose positions predict one of its tokens: all but its last
    attended one (0 for a response of one token)."""
    index = torch.arange(1, response_attention.shape[1] + 1, device=response_attention.device)
    return (response_attention * index).amax(1).clamp(min=1) - 1


# A second group of rows costs another forward call: worth it only for at least this many fewer
# token columns (rows x width) than one group.
MIN_SAVED_POSITIONS = 256


def _length_groups(needed: torch.Tensor) -> list[tuple[torch.Tensor, int]]:
    """(row indices, width) of one group, or of two cut at the length that runs the fewest
    columns: rows sorted by the columns they need; each group as wide as its longest row."""
    order = torch.argsort(needed)
    ordered = needed[order].tolist()
    rows = len(ordered)
    whole = rows * ordered[-1]
    best, cut = whole, rows
    for k in range(1, rows):
        cost = k * ordered[k - 1] + (rows - k) * ordered[-1]
        if cost < best:
            best, cut = cost, k
    if whole - best < MIN_SAVED_POSITIONS:
        groups = [(order, ordered[-1])]
    else:
        groups = [(order[:cut], ordered[cut - 1]), (order[cut:], ordered[-1])]
    return [(rows_of, width) for rows_of, width in groups if width > 0]
