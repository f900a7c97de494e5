"""The built-in GSM8K and MATH scorers give verl 0.9.1's own scores by default.

A table of ordinary and awkward answers, then random strings built from the characters the
scorers react to. `lenient: true` (kuberl's forgiving comparison) is shown to differ where
docs/algorithms.md says it does.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verl.utils.reward_score import default_compute_score as verl_default_compute_score
from verl.utils.reward_score import gsm8k as verl_gsm8k
from verl.utils.reward_score import math_reward as verl_math

from kuberl_runtime.rewards import (
    RewardError,
    build_reward_manager,
    default_compute_score,
    gsm8k,
    math_reward,
)

GSM8K_TABLE = [
    ("so 3 + 4 = 7\n#### 7", "7"),
    ("#### 7.0", "7"),
    ("#### 3.50", "3.5"),
    ("#### 007", "7"),
    ("####7", "7"),
    ("#### $1,234", "1234"),
    ("#### 1,234", "1234"),
    ("#### 18.", "18"),
    ("#### -5", "-5"),
    ("#### 1\nno wait\n#### 2", "2"),
    ("the answer is $1,234.", "1234"),
    ("the answer is 42", "42"),
    ("the answer is 42.", "42"),
    ("a . b", "1"),
    ("nothing numeric", "3"),
    ("x" * 400 + "#### 9", "9"),
    ("#### 9" + "x" * 400, "9"),
]


@pytest.mark.parametrize("method", ["strict", "flexible"])
@pytest.mark.parametrize(("text", "truth"), GSM8K_TABLE)
def test_gsm8k_table_equals_verl(method, text, truth):
    assert gsm8k.extract_solution(text, method) == verl_gsm8k.extract_solution(text, method)
    ours = gsm8k.compute_score(text, truth, method, format_score=0.1, score=1.0)
    assert ours == verl_gsm8k.compute_score(text, truth, method, format_score=0.1, score=1.0)


GSM8K_ALPHABET = st.sampled_from(list("0123456789.,-$# \nx"))


@settings(max_examples=300, deadline=None)
@given(text=st.text(GSM8K_ALPHABET, max_size=40), truth=st.text("0123456789.-", max_size=4))
def test_gsm8k_on_random_strings_equals_verl(text, truth):
    for method in ("strict", "flexible"):
        assert gsm8k.compute_score(text, truth, method) == verl_gsm8k.compute_score(
            text, truth, method
        )


MATH_TABLE = [
    (r"so \boxed{5}", "5"),
    (r"\boxed{\frac12}", r"\frac{1}{2}"),
    (r"\boxed{0.5}", r"\frac{1}{2}"),
    (r"\boxed{0.25}", r"\frac{1}{4}"),
    (r"\boxed{2.0}", "2"),
    (r"\boxed{\dfrac{3}{4}}", r"\frac34"),
    (r"\boxed{3/4}", r"\frac{3}{4}"),
    (r"\fbox{7}", "7"),
    (r"$\boxed 9$ done", "9"),
    (r"\boxed{1} then \boxed{2}", "2"),
    (r"\boxed{\left(1, 2\right)}", "(1,2)"),
    (r"\boxed{90^\circ}", "90"),
    (r"\boxed{5 \text{ cm}}", "5"),
    (r"\boxed{5 \text{ cm} \text{ m}}", r"5 \text{ cm} \text{ m}"),
    (r"\boxed{k = 3}", "3"),
    (r"\boxed{\sqrt3}", r"\sqrt{3}"),
    (r"\boxed{\sqrt}", r"\sqrt"),
    (r"\boxed{\frac}", r"\frac"),
    (r"\boxed{\frac1}", r"\frac1"),
    (r"\boxed{.5}", "0.5"),
    (r"\boxed{50\%}", "50"),
    (r"\boxed{\$5}", "5"),
    (r"\boxed{5", "5"),
    (r"\boxed{7}", r"\boxed{7}"),
    ("no box", "1"),
    (r"\boxed{1}", None),
    (r"\boxed{1}", 1),
]


@pytest.mark.parametrize(("text", "truth"), MATH_TABLE)
def test_math_table_equals_verl(text, truth):
    assert math_reward.compute_score(text, truth) == verl_math.compute_score(text, truth)


MATH_ALPHABET = st.sampled_from(
    ["\\boxed", "\\boxed ", "\\fbox", "{", "}", "\\frac", "\\sqrt", "\\text{ ", "1", "2", ".",
     "/", "=", " ", "$", "\\%", "^\\circ", "\\left", "k", "\\!", "\n", "\\\\"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    parts=st.lists(MATH_ALPHABET, max_size=14),
    truth=st.lists(MATH_ALPHABET, max_size=6).map("".join),
)
def test_math_on_random_latex_equals_verl(parts, truth):
    text = "".join(parts)
    assert math_reward.compute_score(text, truth) == verl_math.compute_score(text, truth)
    assert math_reward.is_equiv(text, truth) == verl_math.is_equiv(text, truth)


@pytest.mark.parametrize(
    ("source", "text", "truth"),
    [
        ("openai/gsm8k", "#### 7", "7"),
        ("openai/gsm8k", "#### 7.0", "7"),
        ("lighteval/MATH", r"\boxed{0.25}", r"\frac{1}{4}"),
        ("HuggingFaceH4/MATH-500", r"\fbox{3}", "3"),
    ],
)
def test_dispatch_by_data_source_equals_verl(source, text, truth):
    assert default_compute_score(source, text, truth) == float(
        verl_default_compute_score(source, text, truth)
    )


@pytest.mark.parametrize(
    ("source", "text", "truth"),
    [
        ("openai/gsm8k", "#### 7.0", "7"),
        ("openai/gsm8k", "####7", "7"),
        ("openai/gsm8k", "#### $1,234", "1234"),
        ("lighteval/MATH", r"\boxed{0.25}", r"\frac{1}{4}"),
        ("lighteval/MATH", r"\fbox{3}", "3"),
    ],
)
def test_lenient_is_an_explicit_option_that_accepts_what_verl_rejects(source, text, truth):
    assert default_compute_score(source, text, truth) == 0.0
    manager = build_reward_manager(reward_kwargs={"lenient": True})
    assert manager.score([text], [source], [truth]).scores == [1.0]
    assert build_reward_manager().score([text], [source], [truth]).scores == [0.0]


def test_builtin_scorers_refuse_reward_kwargs_they_do_not_know():
    with pytest.raises(RewardError, match=r"\['method'\].*accept only \['lenient'\]"):
        build_reward_manager(reward_kwargs={"method": "flexible"})
    with pytest.raises(RewardError, match="lenient must be true or false"):
        build_reward_manager(reward_kwargs={"lenient": "yes"})
