"""The tool-use demo's reward (``custom_reward_function``, verl's signature): 1 when the last
``#### N`` of the trajectory is the product, and whether the policy called a tool.

Returned as a dict, so validation reports ``val-core/<source>/acc`` (accuracy) and
``val-aux/<source>/tool_use`` (the share of answers that called the calculator).
"""

from __future__ import annotations

import re
from typing import Any

ANSWER = re.compile(r"#### (-?\d+)")


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **_: Any
) -> dict[str, float]:
    answers = ANSWER.findall(solution_str)
    correct = float(bool(answers) and answers[-1] == str(ground_truth).strip())
    return {"score": correct, "acc": correct, "tool_use": float("<tool_call>" in solution_str)}
