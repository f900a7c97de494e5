"""GSM8K rule reward with verl 0.9.1's exact behaviour (the default).

Only the last 300 characters are searched. `strict`: the last `#### <number>` (exactly one space,
digits, `.`, `,`, optional leading `-`); commas are dropped. `flexible`: the last run of those
characters that is not empty or a lone `.` (kept as written, commas included). No answer ⇒ 0;
the answer string equal to the ground truth string ⇒ `score`; otherwise `format_score`. Strings
are compared as written: `7.0` is not `7`. `lenient=True` selects kuberl's forgiving comparison
(`gsm8k_lenient`, off by default; docs/algorithms.md lists the differences).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from kuberl_runtime.rewards import gsm8k_lenient

GSM8KMethod = Literal["strict", "flexible"]

SEARCH_WINDOW_CHARS = 300

_STRICT = re.compile(r"#### (-?[0-9.,]+)")
_FLEXIBLE = re.compile(r"(-?[0-9.,]+)")
_NOT_A_NUMBER = ("", ".")


def extract_solution(solution_str: str, method: GSM8KMethod = "strict") -> str | None:
    """The final answer string as verl extracts it, or None."""
    if method not in ("strict", "flexible"):
        raise ValueError(f"method must be 'strict' or 'flexible', got {method!r}")
    tail = solution_str[-SEARCH_WINDOW_CHARS:]
    if method == "strict":
        found = _STRICT.findall(tail)
        return found[-1].replace(",", "").replace("$", "") if found else None
    found = _FLEXIBLE.findall(tail)
    if not found:
        return None
    candidates = [s for s in found if s not in _NOT_A_NUMBER]
    # verl walks back to the last real number; when there is none it ends on the first match.
    return candidates[-1] if candidates else found[0]


def compute_score(
    solution_str: str,
    ground_truth: Any,
    method: GSM8KMethod = "strict",
    format_score: float = 0.0,
    score: float = 1.0,
    lenient: bool = False,
) -> float:
    if lenient:
        return gsm8k_lenient.compute_score(solution_str, ground_truth, method, format_score, score)
    answer = extract_solution(solution_str, method)
    if answer is None:
        return 0.0
    return float(score) if answer == ground_truth else float(format_score)
