"""Per-response-token outputs of a model: log-probs and entropy (policy) or values (critic).

Only the positions that predict response tokens (−L−1 … −2) go through the LM head, so no
(rows × sequence × vocab) tensor is ever built, and the log-softmax over the vocabulary runs in
row chunks (`_ChunkedTokenLogProb`): the [tokens, vocab] fp32 copy, its logsumexp temporaries and
their fp32 gradients never exist; only the logits in the model's dtype and their gradient do.
With `use_remove_padding` the valid tokens of all rows are packed into one sequence with
restarting position ids; the attention kernel (`model_builder.attn_implementation`) then runs
flash-attention varlen where flash-attn is installed, else SDPA with a block-diagonal mask.
Padded rows that share a prompt (GRPO's n samples) run it once (`engine/shared_prefix.py`).
A vision-language batch adds `mrope_position_ids` (rows, 3, T) and the rows' `multi_modal`
inputs (pixel values and grids of their images, in row order); the text positions then only
mark where packed sequences start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import nn

from kuberl_runtime.algorithms import entropy_from_logits
from kuberl_runtime.engine.shared_prefix import (
    LogitsPart,
    prompt_groups,
    shared_prefix_logits,
    shares_prefix,
)
from kuberl_runtime.engine.ulysses import (
    UlyssesGroup,
    gather_sequence,
    is_vision_language,
    local_span,
    pad_sequence,
    padded_length,
)
from kuberl_runtime.engine.ulysses_vision import whole_sequence_inputs

# Rows of the [tokens, vocab] logits turned to fp32 at a time: 512 × 152k × 4 B ≈ 0.3 GB (log-probs
# and entropy alike; entropy's own default, 2048 rows, holds ~5 GB of fp32 temporaries at 152k).
LOGPROB_CHUNK_ROWS = 512


@dataclass(frozen=True)
class ForwardOutput:
    log_probs: torch.Tensor | None = None
    entropy: torch.Tensor | None = None
    values: torch.Tensor | None = None


class _ChunkedTokenLogProb(torch.autograd.Function):
    """log softmax(z)[y] per row, fp32 math on `chunk` rows at a time; saves z, y and logsumexp.

    Backward: ∂/∂z_v = g·(1[v = y] − softmax(z)_v), recomputed per chunk and written straight
    into a gradient in z's dtype.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, chunk: int) -> torch.Tensor:  # type: ignore[override]
        rows = logits.shape[0]
        lse = torch.empty(rows, dtype=torch.float32, device=logits.device)
        picked = logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1).float()
        for start in range(0, rows, chunk):
            lse[start : start + chunk] = torch.logsumexp(logits[start : start + chunk].float(), -1)
        ctx.save_for_backward(logits, labels, lse)
        ctx.chunk = chunk
        return picked - lse

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        logits, labels, lse = ctx.saved_tensors
        grad_logits = torch.empty_like(logits)
        for start in range(0, logits.shape[0], ctx.chunk):
            part = slice(start, start + ctx.chunk)
            probs = torch.exp(logits[part].float() - lse[part, None])
            local = probs.mul_(-grad[part, None].float())
            local.scatter_add_(-1, labels[part, None], grad[part, None].float())
            grad_logits[part] = local.to(grad_logits.dtype)
        return grad_logits, None, None


def token_log_probs(
    logits: torch.Tensor, labels: torch.Tensor, *, chunk_rows: int = LOGPROB_CHUNK_ROWS
) -> torch.Tensor:
    """log softmax(logits)[label] for (..., V) logits as fp32 (...), chunked over rows."""
    flat = logits.reshape(-1, logits.shape[-1])
    out = _ChunkedTokenLogProb.apply(flat, labels.reshape(-1), chunk_rows)
    return out.reshape(labels.shape)


def _scale(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """logits / temperature in place: the LM head's output is not needed by its own backward."""
    return logits if temperature == 1.0 else logits.div_(temperature)


def forward_responses(
    model: nn.Module,
    batch: dict[str, torch.Tensor],
    *,
    temperature: float = 1.0,
    calculate_entropy: bool = False,
    use_remove_padding: bool = False,
    value_head: bool = False,
    sp: UlyssesGroup | None = None,
    multi_modal: Mapping[str, torch.Tensor] | None = None,
) -> ForwardOutput:
    """Run `model` on (rows, P+L) `input_ids` and return (rows, L) outputs for the responses.

    `sp`: this rank's Ulysses group (engine/ulysses.py); with more than one rank in it, the model
    runs on this rank's slice of every sequence and the outputs are gathered back (a
    vision-language model: sliced after its image merge, engine/ulysses_vision.py).
    `multi_modal`: the rows' image inputs (`pixel_values`, `image_grid_thw`), with the batch's
    `mrope_position_ids`."""
    extra = dict(multi_modal or {})
    if sp is not None and sp.size > 1:
        return _forward_sequence_parallel(
            model, batch, sp, temperature, calculate_entropy, use_remove_padding, value_head, extra
        )
    if use_remove_padding:
        return _forward_packed(model, batch, temperature, calculate_entropy, value_head, extra)
    return _forward_padded(model, batch, temperature, calculate_entropy, value_head, extra)


def _forward_padded(
    model, batch, temperature, calculate_entropy, value_head, extra
) -> ForwardOutput:
    responses = batch["responses"]
    length = responses.shape[1]
    # Prompts are left-padded to max_prompt_length; columns no row attends to are dropped (the
    # outputs are the same, the forward shorter: the bench's arithmetic prompts fill 45 of 96).
    start = _first_attended_column(batch["attention_mask"])
    positions = batch["position_ids"][..., start:]
    if "mrope_position_ids" in batch:
        # (3, rows, T), as Qwen2-VL takes
        positions = batch["mrope_position_ids"].transpose(0, 1)[..., start:]
    inputs = {
        "input_ids": batch["input_ids"][:, start:],
        "attention_mask": batch["attention_mask"][:, start:],
        "position_ids": positions,
        "use_cache": False,
        **extra,
    }
    if value_head:
        logits = model(**inputs).logits
        return ForwardOutput(values=logits[:, -length - 1 : -1, 0].float())
    # The L positions before each response token, as indices: contiguous (rows, L, V) logits
    # (slicing `logits_to_keep=L + 1` output would make the row flattening below copy them).
    plain = extra or "mrope_position_ids" in batch or not shares_prefix(model)
    groups = None if plain else prompt_groups(inputs, length)
    if groups is not None:
        parts = shared_prefix_logits(model, inputs, length, *groups)
        return _outputs_of_parts(parts, responses, temperature, calculate_entropy)
    width = inputs["input_ids"].shape[1]
    predictors = torch.arange(width - length - 1, width - 1, device=responses.device)
    logits = model(**inputs, logits_to_keep=predictors).logits
    return _policy_outputs(_scale(logits, temperature), responses, calculate_entropy)


def _outputs_of_parts(
    parts: list[LogitsPart], responses: torch.Tensor, temperature: float, calculate_entropy: bool
) -> ForwardOutput:
    """(rows, L) log-probs (and entropy) from logits covering parts of the response columns;
    columns no part covers (padding) are zero."""
    log_probs = torch.zeros(responses.shape, device=responses.device)
    entropy = torch.zeros(responses.shape, device=responses.device) if calculate_entropy else None
    for part in parts:
        width = part.logits.shape[1]
        columns = torch.arange(
            part.first_column, part.first_column + width, device=responses.device
        )
        where = (part.rows[:, None], columns[None, :])
        labels = responses[part.rows][:, part.first_column : part.first_column + width]
        out = _policy_outputs(_scale(part.logits, temperature), labels, calculate_entropy)
        log_probs = log_probs.index_put(where, out.log_probs)
        if entropy is not None:
            entropy = entropy.index_put(where, out.entropy)
    return ForwardOutput(log_probs=log_probs, entropy=entropy)


def _first_attended_column(attention_mask: torch.Tensor) -> int:
    """The first column any row attends to (0 for an all-padding batch: nothing to trim)."""
    attended = attention_mask.bool().any(0)
    return int(attended.long().argmax()) if bool(attended.any()) else 0


def _forward_packed(
    model, batch, temperature, calculate_entropy, value_head, extra
) -> ForwardOutput:
    responses, response_mask = batch["responses"], batch["response_mask"].bool()
    length = responses.shape[1]
    valid = batch["attention_mask"].bool()
    input_ids = batch["input_ids"][valid].unsqueeze(0)
    position_ids = batch["position_ids"][valid].unsqueeze(0)
    if "mrope_position_ids" in batch:
        # (4, 1, tokens): the text positions first (they mark where packed sequences restart),
        # then the three mrope axes: transformers' packed layout for Qwen2-VL.
        mrope = batch["mrope_position_ids"].transpose(0, 1)[:, valid].unsqueeze(1)
        position_ids = torch.cat([position_ids.unsqueeze(0), mrope])
    flat_index = (valid.flatten().long().cumsum(0) - 1).view(valid.shape)
    width = valid.shape[1]
    # The position before each response token predicts it.
    predictors = flat_index[:, width - length - 1 : width - 1][response_mask]
    inputs = {"input_ids": input_ids, "position_ids": position_ids, "use_cache": False, **extra}
    if value_head:
        values = model(**inputs).logits[0, predictors, 0].float()
        return ForwardOutput(values=_scatter(values, response_mask))
    logits = _scale(model(**inputs, logits_to_keep=predictors).logits[0], temperature)
    out = _policy_outputs(logits, responses[response_mask], calculate_entropy)
    entropy = None if out.entropy is None else _scatter(out.entropy, response_mask)
    assert out.log_probs is not None
    return ForwardOutput(log_probs=_scatter(out.log_probs, response_mask), entropy=entropy)


def _forward_sequence_parallel(
    model, batch, sp, temperature, calculate_entropy, use_remove_padding, value_head, extra
) -> ForwardOutput:
    """Packed (one row of valid tokens) or padded rows, each rank running on its 1/sp slice."""
    responses, response_mask = batch["responses"], batch["response_mask"].bool()
    length = responses.shape[1]
    valid = batch["attention_mask"].bool()
    width = valid.shape[1]
    if use_remove_padding:
        ids, positions = batch["input_ids"][valid][None], batch["position_ids"][valid][None]
        flat_index = (valid.flatten().long().cumsum(0) - 1).view(valid.shape)
        predictors = flat_index[:, width - length - 1 : width - 1][response_mask]
        labels, key_mask = responses[response_mask][None], None
    else:
        ids, positions = batch["input_ids"], batch["position_ids"]
        predictors = torch.arange(width - length - 1, width - 1, device=ids.device)
        labels, key_mask = responses, batch["attention_mask"]
    total = padded_length(ids.shape[1], sp)
    span = local_span(total, sp)
    # Padding tokens: position 0 each (packed: each its own sequence), masked out (padded).
    if is_vision_language(model):
        inputs = whole_sequence_inputs(batch, ids, positions, total, use_remove_padding, extra)
    else:
        inputs = {
            "input_ids": pad_sequence(ids, total)[:, span],
            "position_ids": pad_sequence(positions, total)[:, span],
        }
    inputs.update(use_cache=False, ulysses_group=sp)
    if key_mask is not None:
        inputs["ulysses_key_mask"] = pad_sequence(key_mask, total)[:, span]
    if value_head:
        local = model(**inputs).logits[..., 0].float()
        values = gather_sequence(local, sp)[:, predictors]
        return ForwardOutput(values=_unpack(values, response_mask, use_remove_padding))
    mine = (predictors >= span.start) & (predictors < span.stop)
    kept = predictors[mine] - span.start
    logits = _scale(model(**inputs, logits_to_keep=kept).logits, temperature)
    out = _policy_outputs(logits, labels[:, mine], calculate_entropy)

    def whole(local: torch.Tensor | None) -> torch.Tensor | None:
        if local is None:
            return None
        slots = torch.zeros(local.shape[0], span.stop - span.start, dtype=local.dtype)
        gathered = gather_sequence(slots.to(local.device).index_copy(1, kept, local), sp)
        return _unpack(gathered[:, predictors], response_mask, use_remove_padding)

    return ForwardOutput(log_probs=whole(out.log_probs), entropy=whole(out.entropy))


def _unpack(values: torch.Tensor, response_mask: torch.Tensor, packed: bool) -> torch.Tensor:
    """(rows, L) per-response-token outputs: packed ones scattered back into their rows."""
    return _scatter(values[0], response_mask) if packed else values


def _policy_outputs(
    logits: torch.Tensor, labels: torch.Tensor, calculate_entropy: bool
) -> ForwardOutput:
    log_probs = token_log_probs(logits, labels)
    entropy = (
        entropy_from_logits(logits, chunk_size=LOGPROB_CHUNK_ROWS) if calculate_entropy else None
    )
    return ForwardOutput(log_probs=log_probs, entropy=entropy)


def _scatter(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Put packed per-token values back into a (rows, L) zero tensor at `mask`."""
    out = torch.zeros(mask.shape, dtype=values.dtype, device=values.device)
    return out.masked_scatter(mask, values)
