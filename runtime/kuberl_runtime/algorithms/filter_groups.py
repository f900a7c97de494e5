"""DAPO's group filter (`algorithm.filter_groups`): drop groups whose metric does not vary.

A GRPO group whose responses all score the same has zero advantage everywhere: it carries no
signal. verl (the DAPO trainer documented in verl 0.9's docs/algo/dapo.md, and verl 0.9.1's V1
replay buffer) keeps a group when the population standard deviation of its metric values,
`numpy.std` in float64, is above zero or when it holds one response only. `np.std` is used as
verl uses it, so rounding behaves alike: three responses scoring 0.1 have a std of ~1.4e-17 and
are kept, in verl and here.

The metric per response: `reward` and `seq_reward` are the summed token-level scores (verl 0.9.1's
canonical pre-KL reward, and the DAPO trainer's `token_level_scores.sum(-1)`); `seq_final_reward`
is the summed token-level rewards, which equal the scores because validation refuses it beside
`use_kl_in_reward`; any other name is a key of the reward function's extra info (`acc`, `score`,
...), one value per response.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

SCORE_METRICS = ("reward", "seq_reward", "seq_final_reward")


@dataclass(frozen=True)
class GroupFilter:
    """The outcome of filtering one generation batch."""

    kept_rows: list[int]
    """Rows of the kept groups, in batch order."""
    kept_groups: int
    groups: int


def metric_values(
    metric: str, token_level_scores: torch.Tensor, extra_info: Mapping[str, Sequence[Any]]
) -> list[float]:
    """One value of `metric` per response (row)."""
    if metric in SCORE_METRICS:
        return token_level_scores.sum(-1).double().tolist()
    if metric not in extra_info:
        available = sorted(extra_info) or ["(none: the reward returned plain numbers)"]
        raise ValueError(
            f"algorithm.filter_groups.metric={metric!r} is not among the reward's extra info "
            f"keys {available}; set it to one of those or to one of {list(SCORE_METRICS)}, or "
            "return a dict with that key from the reward function"
        )
    values = list(extra_info[metric])
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"algorithm.filter_groups.metric={metric!r} holds non-numeric values "
            f"({values[:3]}...); pick a numeric key of the reward's extra info"
        ) from err


def filter_groups(uids: Sequence[str], values: Sequence[float]) -> GroupFilter:
    """Keep the rows of groups (by uid) whose values have std > 0 or that hold one row."""
    if len(uids) != len(values):
        raise ValueError(f"{len(uids)} uids but {len(values)} metric values")
    by_uid: dict[str, list[float]] = {}
    for uid, value in zip(uids, values, strict=True):
        by_uid.setdefault(uid, []).append(value)
    kept = {uid for uid, vals in by_uid.items() if len(vals) == 1 or float(np.std(vals)) > 0}
    rows = [row for row, uid in enumerate(uids) if uid in kept]
    return GroupFilter(kept_rows=rows, kept_groups=len(kept), groups=len(by_uid))
