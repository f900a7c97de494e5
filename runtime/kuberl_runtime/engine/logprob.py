"""Per-response-token outputs of a model: log-probs and entropy (policy) or values (critic).

Only the positions that predict response tokens (−L−1 … −2) go through the LM head, so no
(rows × sequence × vocab) tensor is ever built. With `use_remove_padding` the valid tokens of all
rows are packed into one sequence with restarting position ids (the attention mask is then derived
from the position ids: flash-attention varlen on GPU, a block-diagonal SDPA mask on CPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from kuberl_runtime.algorithms import entropy_from_logits


@dataclass(frozen=True)
class ForwardOutput:
    log_probs: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    values: torch.Tensor | None = None


def token_log_probs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[label] as logit[label] − logsumexp(logits): no full log-softmax copy."""
    logits = logits.float()
    picked = logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def forward_responses(
    model: nn.Module,
    batch: dict[str, torch.Tensor],
    *,
    temperature: float = 1.0,
    calculate_entropy: bool = False,
    use_remove_padding: bool = False,
    value_head: bool = False,
) -> ForwardOutput:
    """Run `model` on (rows, P+L) `input_ids` and return (rows, L) outputs for the responses."""
    if use_remove_padding:
        return _forward_packed(model, batch, temperature, calculate_entropy, value_head)
    return _forward_padded(model, batch, temperature, calculate_entropy, value_head)


def _forward_padded(model, batch, temperature, calculate_entropy, value_head) -> ForwardOutput:
    responses = batch["responses"]
    length = responses.shape[1]
    inputs = {
        "input_ids": batch["input_ids"],
        "attention_mask": batch["attention_mask"],
        "position_ids": batch["position_ids"],
        "use_cache": False,
    }
    if value_head:
        logits = model(**inputs).logits
        return ForwardOutput(values=logits[:, -length - 1 : -1, 0].float())
    logits = model(**inputs, logits_to_keep=length + 1).logits[:, :-1]
    return _policy_outputs(logits.div(temperature), responses, calculate_entropy)


def _forward_packed(model, batch, temperature, calculate_entropy, value_head) -> ForwardOutput:
    responses, response_mask = batch["responses"], batch["response_mask"].bool()
    length = responses.shape[1]
    valid = batch["attention_mask"].bool()
    input_ids = batch["input_ids"][valid].unsqueeze(0)
    position_ids = batch["position_ids"][valid].unsqueeze(0)
    flat_index = (valid.flatten().long().cumsum(0) - 1).view(valid.shape)
    width = valid.shape[1]
    # The position before each response token predicts it.
    predictors = flat_index[:, width - length - 1 : width - 1][response_mask]
    inputs = {"input_ids": input_ids, "position_ids": position_ids, "use_cache": False}
    if value_head:
        values = model(**inputs).logits[0, predictors, 0].float()
        return ForwardOutput(values=_scatter(values, response_mask))
    logits = model(**inputs, logits_to_keep=predictors).logits[0].div(temperature)
    out = _policy_outputs(logits, responses[response_mask], calculate_entropy)
    entropy = None if out.entropy is None else _scatter(out.entropy, response_mask)
    assert out.log_probs is not None
    return ForwardOutput(log_probs=_scatter(out.log_probs, response_mask), entropy=entropy)


def _policy_outputs(
    logits: torch.Tensor, labels: torch.Tensor, calculate_entropy: bool
) -> ForwardOutput:
    log_probs = token_log_probs(logits, labels)
    entropy = entropy_from_logits(logits) if calculate_entropy else None
    return ForwardOutput(log_probs=log_probs, entropy=entropy)


def _scatter(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Put packed per-token values back into a (rows, L) zero tensor at `mask`."""
    out = torch.zeros(mask.shape, dtype=values.dtype, device=values.device)
    return out.masked_scatter(mask, values)
