"""Scores → verl's `token_level_scores`: each score sits on its response's last valid token."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def place_scores(
    scores: Sequence[float], response_lengths: Sequence[int], width: int
) -> torch.Tensor:
    """A (len(scores), width) float32 tensor of zeros with scores[i] at [i, response_lengths[i]-1].

    A response length counts valid tokens including the EOS, as the response mask does.
    """
    if len(scores) != len(response_lengths):
        raise ValueError(f"{len(scores)} scores for {len(response_lengths)} responses")
    lengths = torch.as_tensor(list(response_lengths), dtype=torch.long)
    if len(lengths) and (lengths.min() < 1 or lengths.max() > width):
        # verl would silently write an empty response's score at index -1 (the last pad slot).
        raise ValueError(f"response lengths must be in [1, {width}], got {lengths.tolist()}")
    token_level_scores = torch.zeros(len(scores), width, dtype=torch.float32)
    rows = torch.arange(len(scores))
    token_level_scores[rows, lengths - 1] = torch.as_tensor(list(scores), dtype=torch.float32)
    return token_level_scores
