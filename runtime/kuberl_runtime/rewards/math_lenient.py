"""kuberl's forgiving MATH comparison (`reward_kwargs: {lenient: true}`; off by default).

The last `\\boxed{…}` answer, normalised, must equal the ground truth (`math_reward.py` is verl's
exact behaviour; docs/algorithms.md lists the differences case by case).

Normalisation follows the MATH convention verl uses: drop spaces, `\\left`/`\\right`, degrees,
dollars, percent signs and trailing units (`\\text{ cm}`), short `k =` prefixes; `\\tfrac`/`\\dfrac`
→ `\\frac`; brace `\\frac12` and `\\sqrt3`; `a/b` → `\\frac{a}{b}`; `.5` → `0.5`. Differences: where
verl rewrites only the literal `0.5` as `\\frac{1}{2}`, plain numbers and integer fractions here
compare by value (`0.25` equals `\\frac{1}{4}`, `2.0` equals `2`); `\\fbox{}` counts as a box; a
boxed ground truth is unboxed; plain `$` and `%` are dropped too.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BOX_COMMANDS = ("\\boxed", "\\fbox")
_UNIT_MARKERS = ("\\text{ ", "\\mbox{ ")
_LHS_MAX_CHARS = 2  # "k = 5" or "x=3" drop the lhs; longer lhs (equations) are kept


def last_boxed_answer(text: str) -> str | None:
    """Content of the last `\\boxed{…}` / `\\fbox{…}` (or `\\boxed 5`), or None."""
    start = max(text.rfind(cmd) for cmd in _BOX_COMMANDS)
    if start < 0:
        return None
    rest = text[start:]
    if rest.startswith("\\boxed "):
        return rest[len("\\boxed ") :].split("$")[0].strip()
    command = next(cmd for cmd in _BOX_COMMANDS if rest.startswith(cmd))
    arg, _ = _read_group(rest, len(command))
    return arg


def normalize_answer(answer: str) -> str:
    s = answer.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "")
    s = s.replace("\\$", "").replace("$", "")
    for marker in _UNIT_MARKERS:
        s = s.split(marker)[0]
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if s.startswith("."):
        s = "0" + s
    lhs, eq, rhs = s.partition("=")
    if eq and "=" not in rhs and len(lhs.strip()) <= _LHS_MAX_CHARS:
        s = rhs
    s = re.sub(r"\\sqrt\s*([^{\s\\])", r"\\sqrt{\1}", s)
    s = s.replace(" ", "")
    s = _brace_fracs(s)
    return re.sub(r"^(-?\d+)/(\d+)$", r"\\frac{\1}{\2}", s)


def is_equiv(answer: str | None, ground_truth: str | None) -> bool:
    if answer is None or ground_truth is None:
        return False
    a, b = normalize_answer(answer), normalize_answer(ground_truth)
    if a == b:
        return True
    value_a, value_b = _as_fraction(a), _as_fraction(b)
    return value_a is not None and value_a == value_b


def compute_score(solution_str: str, ground_truth: str) -> float:
    truth = last_boxed_answer(ground_truth) if "\\boxed" in ground_truth else ground_truth
    return 1.0 if is_equiv(last_boxed_answer(solution_str), truth) else 0.0


def _read_group(s: str, i: int) -> tuple[str | None, int]:
    """The `{…}` group, `\\command` or single character at i, and the index after it."""
    if i >= len(s):
        return None, i
    if s[i] == "{":
        depth = 0
        for k in range(i, len(s)):
            depth += {"{": 1, "}": -1}.get(s[k], 0)
            if depth == 0:
                return s[i + 1 : k], k + 1
        return None, i
    if s[i] == "\\":
        match = re.match(r"\\[A-Za-z]+", s[i:])
        if match:
            return match.group(0), i + len(match.group(0))
    return s[i], i + 1


def _brace_fracs(s: str) -> str:
    """`\\frac12` / `\\frac1{2}` / `\\frac{1}2` → `\\frac{1}{2}`."""
    out: list[str] = []
    i = 0
    while (j := s.find("\\frac", i)) >= 0:
        out.append(s[i : j + len("\\frac")])
        i = j + len("\\frac")
        for _ in range(2):
            arg, after = _read_group(s, i)
            if arg is None:
                break
            out.append("{" + _brace_fracs(arg) + "}")
            i = after
    out.append(s[i:])
    return "".join(out)


def _as_fraction(s: str) -> Fraction | None:
    match = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", s)
    try:
        if match:
            sign = -1 if match.group(1) else 1
            return sign * Fraction(int(match.group(2)), int(match.group(3)))
        if re.fullmatch(r"-?\d+(\.\d+)?", s):
            return Fraction(s)
    except ZeroDivisionError:
        return None
    return None
