"""Hugging Face rollout: batched generation with a KV cache on an unsharded copy of the policy.

The copy is rebuilt from the actor's config (LoRA included) and refreshed by `update_weights`
each step, as a vLLM engine would be; `sleep` drops the KV cache (HF keeps no other state).
A vision-language model takes each row's image inputs in the prefill, with mrope positions
(`engine/mrope.py`); decoded tokens continue on all three axes, and the vision placeholder tokens
are never sampled (they would stand for no image).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import nn
from transformers import DynamicCache

from kuberl_runtime.data.vision import VisionPrompt
from kuberl_runtime.engine.mrope import MRopeSpec, batch_mrope_positions, next_text_position
from kuberl_runtime.engine.multimodal import image_grids, join_multi_modal
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.rollout.sampling import row_generators, sample_next


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

    @torch.no_grad()
    def generate(
        self,
        prompts: torch.Tensor,
        prompt_mask: torch.Tensor,
        params: SamplingParams,
        seeds: Sequence[int],
        vision: Sequence[VisionPrompt | None] | None = None,
    ) -> torch.Tensor:
        """`vision`: each row's images (None: a text row), for a vision-language model."""
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
        generators = row_generators(seeds, device)
        responses = torch.full((rows, params.response_length), self.pad_id, dtype=torch.long)
        finished = torch.zeros(rows, dtype=torch.bool, device=device)
        eos = torch.tensor(self.eos_ids, dtype=torch.long, device=device)
        ones = torch.ones(rows, 1, dtype=torch.long, device=device)
        cache = DynamicCache()
        out = self.model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
            **images,
        )
        for step in range(params.response_length):
            # Sampled where the logits are: only the chosen ids (rows longs) reach the host.
            tokens = sample_next(self._allowed(out.logits[:, -1]), params, generators)
            tokens = torch.where(finished, torch.full_like(tokens, self.pad_id), tokens)
            responses[:, step] = tokens.cpu()
            if not params.ignore_eos:
                finished |= torch.isin(tokens, eos)
            if finished.all() or step + 1 == params.response_length:
                break
            mask = torch.cat([mask, ones], dim=1)
            out = self.model(
                input_ids=tokens.unsqueeze(1),
                attention_mask=mask,
                position_ids=next_position,
                past_key_values=cache,
                use_cache=True,
            )
            next_position = next_position + 1
        return responses

    def _allowed(self, logits: torch.Tensor) -> torch.Tensor:
        if self.mrope is None:
            return logits
        return logits.index_fill(
            -1, torch.tensor(self.mrope.special_ids, device=logits.device), float("-inf")
        )
