"""Rule-based scorers chosen by a sample's `data_source` (verl's `default_compute_score`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kuberl_runtime.rewards import gsm8k, math_reward
from kuberl_runtime.rewards.errors import RewardError

# score(solution_str, ground_truth, lenient=False) -> float.
Scorer = Callable[..., float]

ARITH_DATA_SOURCE = "kuberl/arith"
DOTS_DATA_SOURCE = "kuberl/dots"

_SCORERS: dict[str, Scorer] = {
    "openai/gsm8k": gsm8k.compute_score,
    # Our synthetic arithmetic fixtures end with "#### <number>" exactly like GSM8K.
    ARITH_DATA_SOURCE: gsm8k.compute_score,
    # The synthetic image prompts (testing/dots.py): the dot count after "####".
    DOTS_DATA_SOURCE: gsm8k.compute_score,
    "lighteval/MATH": math_reward.compute_score,
    "DigitalLearningGmbH/MATH-lighteval": math_reward.compute_score,
    "HuggingFaceH4/MATH-500": math_reward.compute_score,
}


def known_data_sources() -> list[str]:
    return sorted(_SCORERS)


def register_scorer(data_source: str, scorer: Scorer, *, replace: bool = False) -> None:
    """Add a built-in scorer for a data_source (users normally set a custom function instead)."""
    if data_source in _SCORERS and not replace:
        raise RewardError(f"a scorer for data_source {data_source!r} is already registered")
    _SCORERS[data_source] = scorer


def default_compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    lenient: bool = False,
) -> float:
    """Score one response with the built-in scorer for its data_source (verl's exact behaviour
    unless `lenient`)."""
    scorer = _SCORERS.get(data_source)
    if scorer is None:
        raise RewardError(
            f"no built-in reward for data_source {data_source!r}; known data sources are "
            f"{', '.join(known_data_sources())}. For other data, set "
            "custom_reward_function.path (and .name) to your own scoring function"
        )
    # A scorer registered with register_scorer takes (solution_str, ground_truth) only.
    options = {"lenient": True} if lenient else {}
    return scorer(solution_str, ground_truth, **options)
