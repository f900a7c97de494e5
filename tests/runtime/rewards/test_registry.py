from __future__ import annotations

import pytest

from kuberl_runtime.rewards import (
    RewardError,
    default_compute_score,
    known_data_sources,
    register_scorer,
)
from kuberl_runtime.rewards.registry import _SCORERS


@pytest.mark.parametrize("data_source", ["openai/gsm8k", "kuberl/arith"])
def test_gsm8k_style_sources(data_source: str) -> None:
    assert default_compute_score(data_source, "#### 12", "12") == 1.0
    assert default_compute_score(data_source, r"\boxed{12}", "12") == 0.0


@pytest.mark.parametrize(
    "data_source",
    ["lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval", "HuggingFaceH4/MATH-500"],
)
def test_math_sources(data_source: str) -> None:
    assert default_compute_score(data_source, r"\boxed{\frac12}", "0.5") == 1.0
    assert default_compute_score(data_source, "#### 12", "12") == 0.0


def test_unknown_source_lists_known_ones_and_the_way_out() -> None:
    with pytest.raises(RewardError) as info:
        default_compute_score("my/data", "#### 1", "1")
    message = str(info.value)
    assert "'my/data'" in message and "custom_reward_function.path" in message
    for source in known_data_sources():
        assert source in message


def test_register_scorer_adds_and_refuses_silent_replacement(monkeypatch) -> None:
    monkeypatch.setattr("kuberl_runtime.rewards.registry._SCORERS", dict(_SCORERS))
    register_scorer("my/data", lambda solution, truth: float(solution == truth))
    assert default_compute_score("my/data", "a", "a") == 1.0
    with pytest.raises(RewardError, match="already registered"):
        register_scorer("my/data", lambda solution, truth: 0.0)
    register_scorer("my/data", lambda solution, truth: 0.5, replace=True)
    assert default_compute_score("my/data", "a", "a") == 0.5
