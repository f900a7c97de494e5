"""Padded policy forwards run each distinct prompt once: GRPO's n samples share its prefix.

A padded batch holds every prompt n times (`rollout.n` samples of it), so a plain forward runs
the prompt columns n times over (at 128-token responses to ~50-token prompts, about a quarter of
the forward and backward work is prompt columns). Here the rows with the same prompt (ids, mask
and positions alike) run their prompt once, keeping its keys and values (a transformers
`DynamicCache`, gradients flowing through it), and each row then runs only its response columns
against its prompt's cache: the same attention, the same log-probs and gradients as the plain
forward (to fp32 rounding), with the prompt's share of the work divided by n. The log-prob of
response token 0 comes from the prompt's last position, the rest from the response columns.

Not used (the plain forward runs) where no prompt repeats, where a model checkpoints activations
while training (transformers then drops the cache), for value heads and vision-language inputs.
"""

from __future__ import annotations

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


def shared_prefix_logits(
    model: nn.Module,
    inputs: dict[str, torch.Tensor],
    response_length: int,
    first: torch.Tensor,
    inverse: torch.Tensor,
) -> torch.Tensor:
    """(rows, response_length, vocab) logits at the positions that predict each response token:
    the prompt's last position (response token 0), then the response columns but the last."""
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
    cache.batch_select_indices(inverse)  # each row gets its prompt's keys and values
    end = prompt + response_length - 1
    tail = model(
        input_ids=inputs["input_ids"][:, prompt:end],
        attention_mask=inputs["attention_mask"][:, :end],
        position_ids=inputs["position_ids"][:, prompt:end],
        past_key_values=cache,
        use_cache=True,
    ).logits
    return torch.cat([head[inverse], tail], 1)
