"""SFT examples as engine rows: prompts left-padded, responses right-padded, a response mask.

The layout is the RL row layout (``trainer/batch.py``), so ``engine/logprob.py`` computes the
log-probability of each trained token exactly as it does for a rollout's response, packed
(``model.use_remove_padding``) or padded.
"""

from __future__ import annotations

import torch

from kuberl_runtime.sft.data import SFTExample
from kuberl_runtime.trainer.batch import Batch


def collate(examples: list[SFTExample], pad_id: int) -> Batch:
    prompt_len = max(len(e.prompt_ids) for e in examples)
    response_len = max(len(e.response_ids) for e in examples)
    rows = len(examples)
    prompts = torch.full((rows, prompt_len), pad_id, dtype=torch.long)
    responses = torch.full((rows, response_len), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((rows, prompt_len), dtype=torch.long)
    response_valid = torch.zeros((rows, response_len), dtype=torch.long)
    response_mask = torch.zeros((rows, response_len), dtype=torch.long)
    for row, example in enumerate(examples):
        p, r = len(example.prompt_ids), len(example.response_ids)
        prompts[row, prompt_len - p :] = torch.tensor(example.prompt_ids)
        prompt_mask[row, prompt_len - p :] = 1
        responses[row, :r] = torch.tensor(example.response_ids)
        response_valid[row, :r] = 1
        response_mask[row, :r] = torch.tensor(example.loss_mask)
    attention_mask = torch.cat([prompt_mask, response_valid], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return Batch(
        {
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "responses": responses,
            "response_mask": response_mask,
        }
    )


def rank_share(indices: list[int], rank: int, world_size: int) -> list[int]:
    """This rank's contiguous share of a global batch (verl's DistributedSampler split)."""
    per_rank = len(indices) // world_size
    return indices[rank * per_rank : (rank + 1) * per_rank]
