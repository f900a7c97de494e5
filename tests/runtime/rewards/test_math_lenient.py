"""kuberl's forgiving MATH comparison (reward_kwargs lenient: true).

verl's exact one, the default, is compared with verl itself in test_verl_parity_scorers.
"""

from __future__ import annotations

import pytest

from kuberl_runtime.rewards.math_lenient import (
    compute_score,
    is_equiv,
    last_boxed_answer,
    normalize_answer,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so \boxed{5}", "5"),
        (r"\boxed{1} then \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{\left(1, \{2\}\right)}", r"\left(1, \{2\}\right)"),
        (r"\fbox{7}", "7"),
        (r"$\boxed 9$ done", "9"),
        (r"\boxed{unclosed", None),
        ("no box", None),
    ],
)
def test_last_boxed_answer(text: str, expected: str | None) -> None:
    assert last_boxed_answer(text) == expected


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        (r"\dfrac{1}{2}", r"\frac{1}{2}"),
        (r"\frac12", r"\frac{1}{2}"),
        (r"\frac1{22}", r"\frac{1}{22}"),
        (r"\frac{\frac12}3", r"\frac{\frac{1}{2}}{3}"),
        (r"\frac\pi2", r"\frac{\pi}{2}"),
        (r"\sqrt3", r"\sqrt{3}"),
        (r"2\sqrt 2", r"2\sqrt{2}"),
        (r"\left( 1, 2 \right)", "(1,2)"),
        (r"90^\circ", "90"),
        (r"90^{\circ}", "90"),
        (r"\$5", "5"),
        (r"5\text{ cm}", "5"),
        (r"50\%", "50"),
        (".5", "0.5"),
        ("k = 3", "3"),
        ("y = 2x + 3", "2x+3"),
        ("abc = 12", "abc=12"),  # lhs longer than two characters: an equation, kept
        ("3/4", r"\frac{3}{4}"),
        ("x/4", "x/4"),
    ],
)
def test_normalize_answer(raw: str, normalized: str) -> None:
    assert normalize_answer(raw) == normalized


@pytest.mark.parametrize(
    ("answer", "truth", "equal"),
    [
        ("0.5", r"\frac{1}{2}", True),
        ("0.25", r"\frac14", True),
        ("2.0", "2", True),
        (r"-\frac{1}{2}", "-0.5", True),
        ("1/2", r"\dfrac{1}{2}", True),
        (r"\left(3, 4\right)", "(3,4)", True),
        ("0.5", r"\frac{1}{3}", False),
        ("3", "4", False),
        (None, "4", False),
    ],
)
def test_is_equiv(answer: str | None, truth: str, equal: bool) -> None:
    assert is_equiv(answer, truth) is equal


def test_compute_score_uses_last_box_only() -> None:
    assert compute_score(r"first \boxed{3}, finally \boxed{\frac{1}{2}}", "0.5") == 1.0
    assert compute_score(r"first \boxed{0.5}, finally \boxed{3}", "0.5") == 0.0
    assert compute_score("the answer is 0.5", "0.5") == 0.0


def test_ground_truth_given_as_boxed_solution_is_unwrapped() -> None:
    assert compute_score(r"\boxed{4}", r"so $\boxed{4}$") == 1.0
