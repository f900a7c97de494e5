"""MATH rule reward with verl 0.9.1's exact behaviour (the default).

The answer is the content of the last `\\boxed{…}` (or the text after the last `\\boxed `, up to a
`$`); `\\fbox{…}` is found but never scores, because only `\\boxed` is unwrapped. Answer and ground
truth (taken as written, not unboxed) are normalised the MATH way and compared as strings; when
normalising fails on malformed LaTeX the raw strings are compared instead. `lenient=True` selects
kuberl's forgiving comparison (`math_lenient`, off by default; docs/algorithms.md lists the
differences case by case).
"""

from __future__ import annotations

import logging
from typing import Any

from kuberl_runtime.rewards import math_lenient

logger = logging.getLogger(__name__)

BOXED = "\\boxed"
BOXED_SPACE = "\\boxed "
BOXED_BRACE = "\\boxed{"
FBOX = "\\fbox"
UNITS = "\\text{ "
_KEY_MAX_CHARS = 2  # "k=5" drops "k="; longer left-hand sides stay


class MalformedAnswer(ValueError):
    """LaTeX the MATH normaliser cannot take apart (verl then compares the raw strings)."""


def compute_score(solution_str: str, ground_truth: Any, lenient: bool = False) -> float:
    if lenient:
        return math_lenient.compute_score(solution_str, ground_truth)
    boxed = last_boxed_only(solution_str)
    if boxed is None:
        return 0.0
    try:
        answer = remove_boxed(boxed)
    except MalformedAnswer as err:
        logger.debug("no MATH answer in %r: %s", boxed, err)
        return 0.0
    return 1.0 if is_equiv(answer, ground_truth) else 0.0


def last_boxed_only(text: str) -> str | None:
    """The last `\\boxed{…}` with its braces (or `\\fbox{…}` when there is no `\\boxed`)."""
    if BOXED_SPACE in text:
        return BOXED_SPACE + text.split(BOXED_SPACE)[-1].split("$")[0]
    start = text.rfind(BOXED)
    if start < 0:
        start = text.rfind(FBOX)
        if start < 0:
            return None
    depth = 0
    for end in range(start, len(text)):
        if text[end] == "{":
            depth += 1
        elif text[end] == "}":
            depth -= 1
            if depth == 0:
                return text[start : end + 1]
    return None


def remove_boxed(boxed: str) -> str:
    if BOXED_SPACE in boxed:
        if not boxed.startswith(BOXED_SPACE):
            raise MalformedAnswer(f"{boxed!r} does not start with {BOXED_SPACE!r}")
        return boxed[len(BOXED_SPACE) :]
    if not (boxed.startswith(BOXED_BRACE) and boxed.endswith("}")):
        raise MalformedAnswer(f"{boxed!r} is not a \\boxed{{…}} group")
    return boxed[len(BOXED_BRACE) : -1]


def is_equiv(answer: Any, ground_truth: Any) -> bool:
    if answer is None and ground_truth is None:
        return True
    if answer is None or ground_truth is None:
        return False
    try:
        return normalize(answer) == normalize(ground_truth)
    except (MalformedAnswer, AttributeError, IndexError):
        return answer == ground_truth


_REMOVED = ("\n", "\\!")
_REPLACED = (("\\\\", "\\"), ("tfrac", "frac"), ("dfrac", "frac"))
_REMOVED_AFTER = ("\\left", "\\right", "^{\\circ}", "^\\circ", "\\$")


def normalize(s: str) -> str:
    """The MATH normal form verl compares (raises on LaTeX it cannot take apart)."""
    for token in _REMOVED:
        s = s.replace(token, "")
    for old, new in _REPLACED:
        s = s.replace(old, new)
    for token in _REMOVED_AFTER:
        s = s.replace(token, "")
    s = _drop_units(s)
    s = s.replace("\\\\%", "").replace("\\%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    sides = s.split("=")
    if len(sides) == 2 and len(sides[0]) <= _KEY_MAX_CHARS:
        s = sides[1]
    s = _brace_sqrt(s).replace(" ", "")
    s = _brace_fracs(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    return _slash_to_frac(s)


def _drop_units(s: str) -> str:
    if UNITS not in s:
        return s
    parts = s.split(UNITS)
    if len(parts) != 2:
        raise MalformedAnswer(f"{s!r} has {len(parts) - 1} unit groups")
    return parts[0]


def _brace_sqrt(s: str) -> str:
    """`\\sqrt3` → `\\sqrt{3}` (one character)."""
    if "\\sqrt" not in s:
        return s
    head, *rest = s.split("\\sqrt")
    out = [head]
    for part in rest:
        if part[0] == "{":  # IndexError on a trailing \sqrt: verl falls back to raw strings
            out.append("\\sqrt" + part)
        else:
            out.append("\\sqrt{" + part[0] + "}" + part[1:])
    return "".join(out)


def _brace_fracs(s: str) -> str:
    """`\\frac12` → `\\frac{1}{2}`, `\\frac1{2}` → `\\frac{1}{2}`; malformed ⇒ unchanged."""
    head, *rest = s.split("\\frac")
    out = [head]
    for part in rest:
        out.append("\\frac")
        if part[0] == "{":  # IndexError on a trailing \frac, as in verl
            out.append(part)
            continue
        if len(part) < 2:
            return s
        numerator, second = part[0], part[1]
        if second == "{":
            out.append("{" + numerator + "}" + part[1:])
        else:
            out.append("{" + numerator + "}{" + second + "}" + part[2:])
    return "".join(out)


def _slash_to_frac(s: str) -> str:
    """`3/4` → `\\frac{3}{4}` when both sides are integers written plainly."""
    sides = s.split("/")
    if len(sides) != 2:
        return s
    try:
        numerator, denominator = int(sides[0]), int(sides[1])
    except ValueError:
        return s
    if s != f"{numerator}/{denominator}":
        return s
    return "\\frac{" + str(numerator) + "}{" + str(denominator) + "}"
