"""Row chunking for vocabulary-wide math: touch at most chunk_size × vocab elements at a time."""

from __future__ import annotations

from collections.abc import Iterator

import torch

# verl's entropy chunk (entropy_from_logits_with_chunking): 2048 rows per chunk.
DEFAULT_CHUNK_ROWS = 2048


def row_slices(num_rows: int, chunk_size: int) -> Iterator[slice]:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be ≥ 1, got {chunk_size}")
    for start in range(0, num_rows, chunk_size):
        yield slice(start, min(start + chunk_size, num_rows))


def as_rows(logits: torch.Tensor) -> torch.Tensor:
    """(..., V) → (N, V), a view for contiguous logits."""
    return logits.reshape(-1, logits.shape[-1])


def compute_dtype(logits: torch.Tensor) -> torch.dtype:
    """At least float32: bf16 softmax sums lose the small probabilities entropy and KL live on."""
    return torch.promote_types(logits.dtype, torch.float32)
