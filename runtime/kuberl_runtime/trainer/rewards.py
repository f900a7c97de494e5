"""Scores for a batch of responses: rule/custom reward functions and, optionally, a reward model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from kuberl_runtime.rewards import RewardManager, decode_responses
from kuberl_runtime.rewards.placement import place_scores
from kuberl_runtime.trainer.batch import Batch


def response_attention(batch: Batch) -> torch.Tensor:
    """1 on each response's tokens: the policy's and, in a multi-turn trajectory, the tools'
    (``response_mask`` covers the policy's only); verl scores the whole trajectory's text."""
    return batch["attention_mask"][:, -batch.response_length :]


def valid_response_ids(batch: Batch) -> list[list[int]]:
    responses, mask = batch["responses"], response_attention(batch).bool()
    return [row[m].tolist() for row, m in zip(responses, mask, strict=True)]


def score_batch(
    batch: Batch,
    reward_manager: RewardManager,
    tokenizer: Any,
    model_scores: Sequence[float] | None = None,
) -> tuple[torch.Tensor, dict[str, list[Any]]]:
    """`token_level_scores` (rows, L) and the scorer's extra info per response.

    With a reward model (`reward_model.enable`) its scores are used as they are, as verl's reward
    managers do when `rm_scores` are present; otherwise the reward function scores the text.
    """
    lengths = response_attention(batch).sum(-1).tolist()
    if model_scores is not None:
        return place_scores(list(model_scores), lengths, batch.response_length), {}
    texts = decode_responses(tokenizer, valid_response_ids(batch))
    output = reward_manager.score_samples(batch.objects["sample"], texts, lengths)
    return place_scores(output.scores, lengths, batch.response_length), output.extra_info
