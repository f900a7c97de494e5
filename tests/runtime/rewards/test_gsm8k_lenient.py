"""kuberl's forgiving GSM8K comparison (reward_kwargs lenient: true).

verl's exact one, the default, is compared with verl itself in test_verl_parity_scorers.
"""

from __future__ import annotations

import pytest

from kuberl_runtime.rewards.gsm8k_lenient import compute_score, extract_solution


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so 3 + 4 = 7\n#### 7", "7"),
        ("#### 1,234", "1234"),
        ("#### $18", "18"),
        ("####18", "18"),
        ("#### -5", "-5"),
        ("#### $-5", "-5"),
        ("#### 2.50", "2.50"),
        ("#### 18.", "18"),  # sentence-final period is punctuation, not a decimal point
        ("#### 1\nwait, no\n#### 2", "2"),  # the last marked answer wins
        ("the answer is 7", None),
        ("#### seven", None),
    ],
)
def test_strict_extraction(text: str, expected: str | None) -> None:
    assert extract_solution(text, "strict") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3 apples plus 4 apples is 7 apples.", "7"),
        ("It costs $1,200.", "1200"),
        ("down to -3 degrees", "-3"),
        ("about .5 of them", ".5"),
        ("no digits here.", None),
        ("#### 12 and then 13", "13"),
    ],
)
def test_flexible_extraction(text: str, expected: str | None) -> None:
    assert extract_solution(text, "flexible") == expected


def test_only_the_last_300_characters_are_searched() -> None:
    answer = "#### 42"
    inside = answer + "x" * (300 - len(answer))
    outside = answer + "x" * (301 - len(answer))
    assert extract_solution(inside) == "42"
    assert extract_solution(outside) is None
    assert compute_score(outside, "42") == 0.0


@pytest.mark.parametrize(
    ("text", "truth", "expected"),
    [
        ("#### 72", "72", 1.0),
        ("#### 72", "73", 0.0),
        ("#### 1,000", "1000", 1.0),
        ("#### 18.50", "18.5", 1.0),  # compared by value, not spelling
        ("#### 0.1", "1", 0.0),
        ("no marker, 72", "72", 0.0),  # strict ignores unmarked numbers
    ],
)
def test_strict_score(text: str, truth: str, expected: float) -> None:
    assert compute_score(text, truth) == expected


def test_format_score_for_wrong_but_well_formed_answers() -> None:
    assert compute_score("#### 5", "6", format_score=0.1) == 0.1
    assert compute_score("no answer", "6", format_score=0.1) == 0.0
    assert compute_score("#### 6", "6", format_score=0.1, score=2.0) == 2.0


def test_flexible_score_accepts_unmarked_answer() -> None:
    assert compute_score("so the total is 72.", "72", method="flexible") == 1.0


def test_unknown_method_is_rejected() -> None:
    with pytest.raises(ValueError, match="strict"):
        extract_solution("#### 1", "loose")  # type: ignore[arg-type]
