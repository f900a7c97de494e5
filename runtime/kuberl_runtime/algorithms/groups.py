"""Per-prompt groups: the n responses sampled for one prompt share a uid.

Group statistics are computed with scatter ops (no Python loop over groups), and means are taken
relative to the group minimum: mathematically the same mean, but a group of equal rewards then
has a mean that equals each reward exactly, so its advantages are exactly zero.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

GroupIndex = torch.Tensor | Sequence[Hashable]


def group_ids(index: GroupIndex, device: torch.device | None = None) -> tuple[torch.Tensor, int]:
    """Map per-row uids (ints, strings, uuid objects) to contiguous ids 0..G−1; returns (ids, G)."""
    if isinstance(index, torch.Tensor):
        _, ids = torch.unique(index, return_inverse=True)
        num_groups = int(ids.max().item()) + 1 if ids.numel() else 0
        return ids.to(device=device, dtype=torch.long), num_groups
    first_seen: dict[Hashable, int] = {}
    ids_list = [first_seen.setdefault(uid, len(first_seen)) for uid in index]
    return torch.tensor(ids_list, dtype=torch.long, device=device), len(first_seen)


def group_sizes(ids: torch.Tensor, num_groups: int) -> torch.Tensor:
    return torch.bincount(ids, minlength=num_groups)


def _group_sum(values: torch.Tensor, ids: torch.Tensor, num_groups: int) -> torch.Tensor:
    return torch.zeros(num_groups, dtype=values.dtype, device=values.device).index_add_(
        0, ids, values
    )


def group_reduce(values: torch.Tensor, ids: torch.Tensor, num_groups: int, op: str) -> torch.Tensor:
    """Per-group amin / amax of a per-row tensor."""
    out = torch.empty(num_groups, dtype=values.dtype, device=values.device)
    return out.scatter_reduce_(0, ids, values, reduce=op, include_self=False)


def group_mean(
    scores: torch.Tensor,
    ids: torch.Tensor,
    num_groups: int,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-group (weighted) mean of per-row scores, exact for groups of equal scores."""
    weights = torch.ones_like(scores) if weights is None else weights.to(scores.dtype)
    anchor = group_reduce(scores, ids, num_groups, "amin")
    shifted = _group_sum(weights * (scores - anchor[ids]), ids, num_groups)
    return anchor + shifted / _group_sum(weights, ids, num_groups)


def group_std(scores: torch.Tensor, ids: torch.Tensor, num_groups: int) -> torch.Tensor:
    """Per-group unbiased standard deviation (torch.std convention); NaN for singleton groups."""
    centered = scores - group_mean(scores, ids, num_groups)[ids]
    sizes = group_sizes(ids, num_groups).to(scores.dtype)
    return torch.sqrt(_group_sum(centered**2, ids, num_groups) / (sizes - 1))
