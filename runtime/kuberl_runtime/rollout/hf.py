"""Hugging Face rollout: batched generation with a KV cache on an unsharded copy of the policy.

The copy is rebuilt from the actor's config (LoRA included) and refreshed by `update_weights`
each step, as a vLLM engine would be; `sleep` drops the KV cache (HF keeps no other state).
A vision-language model takes each row's image inputs in the prefill, with mrope positions
(`engine/mrope.py`); decoded tokens continue on all three axes, and the vision placeholder tokens
are never sampled (they would stand for no image).

Decoding does only the work the tokens need: the KV cache is allocated once for the prompt plus
the longest response (`rollout/decode_cache.py`, which also reads grouped KV heads in place on
the CPU); a row leaves the batch at its EOS (cache, mask and positions are compacted; every row
keeps its own random stream, so its tokens do not depend on which rows are still live); rows
with the same text prompt (GRPO's n samples) share one prefill and copy its KV cache. For the
same seeds the tokens are those of the plain full-batch loop (`tests/runtime/rollout`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import Cache

from kuberl_runtime.data.vision import VisionPrompt
from kuberl_runtime.engine.mrope import MRopeSpec, batch_mrope_positions, next_text_position
from kuberl_runtime.engine.multimodal import image_grids, join_multi_modal
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.rollout.decode_cache import decode_attention, decode_cache, keep_rows
from kuberl_runtime.rollout.sampling import processed_log_probs, row_generators, sample_next


class HFRollout:
    def __init__(self, model: nn.Module, *, eos_ids: Sequence[int], pad_id: int) -> None:
        self.model = model.eval()
        self.model.requires_grad_(False)
        self.eos_ids = list(eos_ids)
        self.pad_id = pad_id
        self.mrope = MRopeSpec.of(model.config)

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        own = self.model.state_dict()
        with torch.no_grad():
            for name, tensor in named_tensors:
                own[name].copy_(tensor.to(own[name].device))

    def sleep(self) -> None:
        """Nothing persists between `generate` calls: the KV cache is per call."""

    def wake_up(self) -> None:
        """See `sleep`."""

    def close(self) -> None:
        """The model is the trainer's host copy: nothing of its own to free."""

    def generate(
        self,
        prompts: torch.Tensor,
        prompt_mask: torch.Tensor,
        params: SamplingParams,
        seeds: Sequence[int],
        vision: Sequence[VisionPrompt | None] | None = None,
    ) -> torch.Tensor:
        """`vision`: each row's images (None: a text row), for a vision-language model."""
        return self._generate(prompts, prompt_mask, params, seeds, vision, scored=False)[0]

    def generate_with_log_probs(
        self,
        prompts: torch.Tensor,
        prompt_mask: torch.Tensor,
        params: SamplingParams,
        seeds: Sequence[int],
        vision: Sequence[VisionPrompt | None] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The responses and each sampled token's log-prob under the distribution it was drawn
        from (`sampling.processed_log_probs`), fp32, 0 after the row's end."""
        responses, log_probs = self._generate(
            prompts, prompt_mask, params, seeds, vision, scored=True
        )
        assert log_probs is not None
        return responses, log_probs

    @torch.no_grad()
    def _generate(
        self,
        prompts: torch.Tensor,
        prompt_mask: torch.Tensor,
        params: SamplingParams,
        seeds: Sequence[int],
        vision: Sequence[VisionPrompt | None] | None,
        scored: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        multi_modal = [v.inputs if v is not None else None for v in vision or [None] * len(prompts)]
        device = next(self.model.parameters()).device
        prompts, prompt_mask = prompts.to(device), prompt_mask.to(device)
        rows = prompts.shape[0]
        start = int((prompt_mask.sum(0) > 0).long().argmax())  # drop columns that are all padding
        input_ids, mask = prompts[:, start:], prompt_mask[:, start:].long()
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        next_position = positions[:, -1:] + 1
        images = join_multi_modal(multi_modal, device)
        if self.mrope is not None:
            grids = image_grids(multi_modal)
            mrope = batch_mrope_positions(input_ids, mask, grids, self.mrope).to(device)
            positions = mrope.transpose(0, 1)  # (3, rows, P)
            next_position = next_text_position(mrope).unsqueeze(1)
        responses = torch.full((rows, params.response_length), self.pad_id, dtype=torch.long)
        log_probs = torch.zeros(responses.shape) if scored else None
        with decode_attention(self.model):
            state = _Decode.start(
                self.model.config, mask, params, seeds, next_position, self.eos_ids
            )
            out = self._prefill(state.cache, input_ids, mask, positions, images)
            logits = out.logits[:, -1]
            for step in range(params.response_length):
                # Sampled where the logits are: only the chosen ids (live rows) reach the host.
                allowed = self._allowed(logits)
                tokens = sample_next(allowed, params, state.generators)
                responses[state.live, step] = tokens.cpu()
                if log_probs is not None:
                    chosen = processed_log_probs(allowed, tokens, params)
                    log_probs[state.live, step] = chosen.cpu()
                if step + 1 == params.response_length:
                    break
                if not params.ignore_eos:
                    tokens = state.drop_finished(tokens)
                    if tokens is None:
                        break  # every row has finished
                step_mask, step_position = state.advance()
                logits = self.model(
                    input_ids=tokens.unsqueeze(1),
                    attention_mask=step_mask,
                    position_ids=step_position,
                    past_key_values=state.cache,
                    use_cache=True,
                ).logits[:, -1]
        return responses, log_probs

    def _prefill(self, cache, input_ids, mask, positions, images):  # type: ignore[no-untyped-def]
        """One forward over the prompts; rows with the same prompt (a group of n samples without
        images) run once and their KV cache and last logits are copied to the others."""
        unique, inverse = _distinct_rows(input_ids, mask) if not images else (None, None)
        if unique is not None:
            input_ids, mask, positions = input_ids[unique], mask[unique], positions[..., unique, :]
        out = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
            **images,
        )
        if unique is not None:
            keep_rows(cache, inverse)
            out.logits = out.logits[inverse]
        return out

    def _allowed(self, logits: torch.Tensor) -> torch.Tensor:
        if self.mrope is None:
            return logits
        return logits.index_fill(
            -1, torch.tensor(self.mrope.special_ids, device=logits.device), float("-inf")
        )


@dataclass
class _Decode:
    """The rows still generating: their KV cache, attention mask, next position, random stream.

    A row leaves the batch at its EOS; the others keep their own generators, so each row draws
    the same noise at each of its steps whichever rows still share the batch.
    """

    cache: Cache
    live: torch.Tensor  # (live,) the rows' indices in the call's batch, on the host
    generators: list[torch.Generator]
    mask: torch.Tensor  # (live, prompt columns + response_length); ones past the prompt
    filled: int  # columns in the KV cache
    next_position: torch.Tensor  # (live, 1)
    eos: torch.Tensor

    @classmethod
    def start(
        cls,
        config: Any,
        mask: torch.Tensor,
        params: SamplingParams,
        seeds: Sequence[int],
        next_position: torch.Tensor,
        eos_ids: Sequence[int],
    ) -> _Decode:
        rows, width = mask.shape
        capacity = width + params.response_length
        buffer = mask.new_ones((rows, capacity))
        buffer[:, :width] = mask
        return cls(
            cache=decode_cache(config, capacity),
            live=torch.arange(rows),
            generators=row_generators(seeds, mask.device),
            mask=buffer,
            filled=width,
            next_position=next_position,
            eos=torch.tensor(list(eos_ids), dtype=torch.long, device=mask.device),
        )

    def drop_finished(self, tokens: torch.Tensor) -> torch.Tensor | None:
        """The unfinished rows' tokens (None: none left); finished rows leave every buffer."""
        done = torch.isin(tokens, self.eos)
        if not bool(done.any()):
            return tokens
        keep = (~done).nonzero().flatten()
        if keep.numel() == 0:
            return None
        keep_rows(self.cache, keep)
        on_host = keep.cpu()
        self.live = self.live[on_host]
        self.generators = [self.generators[i] for i in on_host.tolist()]
        self.mask, self.next_position = self.mask[keep], self.next_position[keep]
        return tokens[keep]

    def advance(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(attention mask, position ids) for the next token of every live row."""
        self.filled += 1
        position = self.next_position
        self.next_position = position + 1
        return self.mask[:, : self.filled], position


def _distinct_rows(
    input_ids: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(the first row of each distinct prompt, each row's index into them); (None, None) when
    no two rows share a prompt."""
    key = torch.where(mask.bool(), input_ids, -1)
    distinct, inverse = torch.unique(key, dim=0, return_inverse=True)
    rows = key.shape[0]
    if distinct.shape[0] == rows:
        return None, None
    first = torch.full((distinct.shape[0],), rows, dtype=torch.long, device=key.device)
    first = first.scatter_reduce(0, inverse, torch.arange(rows, device=key.device), "amin")
    return first, inverse
