"""What a reward manager returns: a score per response and verl's `reward_extra_info`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RewardOutput:
    """Per-response scores and verl's `reward_extra_info` (each extra key: a value per response)."""

    scores: list[float]
    extra_info: dict[str, list[Any]] = field(default_factory=dict)
