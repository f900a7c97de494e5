"""The rollout interface and the verl batch layout every engine returns.

An engine gets left-padded prompts (rows, P) and per-row seeds and returns responses (rows, L)
right-padded with the pad id. `build_response_batch` turns those into verl's layout: the response
mask covers tokens up to and including the first EOS, position ids continue from the prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from kuberl_runtime.data.vision import VisionPrompt
from kuberl_runtime.trainer.batch import Batch


@dataclass(frozen=True)
class SamplingParams:
    response_length: int
    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0
    do_sample: bool = True
    ignore_eos: bool = False

    @property
    def greedy(self) -> bool:
        return not self.do_sample or self.temperature == 0


class RolloutEngine(Protocol):
    def generate(
        self,
        prompts: torch.Tensor,
        prompt_mask: torch.Tensor,
        params: SamplingParams,
        seeds: Sequence[int],
        vision: Sequence[VisionPrompt | None] | None = None,
    ) -> torch.Tensor:
        """(rows, response_length) response ids, pad after the first EOS. `vision`: each row's
        images (None for a text row) when the policy is a vision-language model."""
        ...

    def generate_with_log_probs(
        self,
        prompts: torch.Tensor,
        prompt_mask: torch.Tensor,
        params: SamplingParams,
        seeds: Sequence[int],
        vision: Sequence[VisionPrompt | None] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`generate`'s responses and the engine's own log-prob of each sampled token, (rows,
        response_length) fp32, 0 after the row's end: log-softmax of the logits after
        temperature and top-k/top-p (the plain logits when greedy), as vLLM's
        `processed_logprobs`. Rollout correction compares them with the trainer's."""
        ...

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Take the trained policy's full weights, one tensor at a time."""
        ...

    def sleep(self) -> None:
        """Release generation memory (KV cache, weights where the engine can) between rounds."""
        ...

    def wake_up(self) -> None: ...

    def close(self) -> None:
        """Free the engine, while the trainer's process group still exists (the launcher calls it
        before `shutdown_distributed`)."""
        ...


def response_mask_from(
    responses: torch.Tensor, eos_ids: Sequence[int], ignore_eos: bool
) -> torch.Tensor:
    """1 up to and including the first EOS, 0 after (all ones with ignore_eos)."""
    if ignore_eos or not eos_ids:
        return torch.ones_like(responses)
    is_eos = torch.isin(responses, torch.tensor(list(eos_ids), dtype=responses.dtype))
    eos_seen_before = (is_eos.long().cumsum(-1) - is_eos.long()) > 0
    return (~eos_seen_before).long()


def build_response_batch(
    prompts: torch.Tensor,
    prompt_mask: torch.Tensor,
    responses: torch.Tensor,
    *,
    eos_ids: Sequence[int],
    pad_id: int,
    ignore_eos: bool = False,
) -> Batch:
    response_mask = response_mask_from(responses, eos_ids, ignore_eos)
    responses = torch.where(response_mask.bool(), responses, torch.full_like(responses, pad_id))
    prompt_positions = (prompt_mask.long().cumsum(-1) - 1).clamp(min=0)
    last = prompt_positions[:, -1:]
    steps = torch.arange(1, responses.shape[1] + 1).unsqueeze(0)
    attention_mask = torch.cat([prompt_mask.long(), response_mask], dim=1)
    return Batch(
        {
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": attention_mask,
            "position_ids": torch.cat([prompt_positions, last + steps], dim=1),
            "response_mask": response_mask,
        }
    )
