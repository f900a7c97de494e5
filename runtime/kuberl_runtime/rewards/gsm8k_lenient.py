"""kuberl's forgiving GSM8K comparison (`reward_kwargs: {lenient: true}`; off by default).

Same contract as verl's scorer (`gsm8k.py`) — only the last 300 characters are searched, no
answer ⇒ 0, right answer ⇒ `score`, wrong answer ⇒ `format_score`. Differences, all in the
direction of accepting answers verl rejects (docs/algorithms.md lists them case by case):
  * `#### $1,234` and `####18` are read (verl's regex needs exactly one space and no `$`);
  * a sentence-final period is not part of the number (`#### 18.` reads as 18);
  * numbers compare by value when both parse (`18.50` equals ground truth `18.5`);
  * the flexible mode strips `$` and thousands commas from the last number.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Literal

GSM8KMethod = Literal["strict", "flexible"]

# Only the tail is searched: a long reasoning trace mentions many numbers, the answer comes last.
SEARCH_WINDOW_CHARS = 300

_NUMBER = r"-?\$?-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)"
_STRICT = re.compile(r"####\s*(" + _NUMBER + r")")
_ANY_NUMBER = re.compile(_NUMBER)


def extract_solution(solution_str: str, method: GSM8KMethod = "strict") -> str | None:
    """The final answer as a plain number string (no `$` or thousands commas), or None."""
    if method not in ("strict", "flexible"):
        raise ValueError(f"method must be 'strict' or 'flexible', got {method!r}")
    tail = solution_str[-SEARCH_WINDOW_CHARS:]
    pattern = _STRICT if method == "strict" else _ANY_NUMBER
    matches = pattern.findall(tail)
    if not matches:
        return None
    return _clean_number(matches[-1])


def compute_score(
    solution_str: str,
    ground_truth: str,
    method: GSM8KMethod = "strict",
    format_score: float = 0.0,
    score: float = 1.0,
) -> float:
    answer = extract_solution(solution_str, method)
    if answer is None:
        return 0.0
    return score if answers_match(answer, ground_truth) else format_score


def answers_match(answer: str, ground_truth: str) -> bool:
    truth = _clean_number(str(ground_truth).strip())
    if answer == truth:
        return True
    try:
        return Decimal(answer) == Decimal(truth)
    except InvalidOperation:
        return False


def _clean_number(text: str) -> str:
    return text.replace(",", "").replace("$", "")
