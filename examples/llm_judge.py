"""An LLM-judge reward function for a generative reward model.

Point ``custom_reward_function.path`` at this file beside a served judge::

    reward:
      reward_model:
        enable: true
        model_path: /models/judge          # an instruction-tuned causal LM
        rollout: {name: vllm, tensor_model_parallel_size: 1, gpu_memory_utilization: 0.3}
      custom_reward_function:
        path: examples/llm_judge.py
        reward_kwargs: {max_score: 10}

kuberl calls ``compute_score`` for each response with ``reward_router_address`` (the judge's
OpenAI-compatible endpoint on this rank) and ``reward_model_tokenizer``, as verl 0.9's reward loop
does. The judge is asked for a grade from 0 to ``max_score``; the last number of its reply is the
grade, and the reward is grade / max_score (0 when the reply holds no number in range).
"""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any

PROMPT = """Grade the answer to the question below.

Question:
{question}

Reference answer (may be empty):
{reference}

Answer to grade:
{answer}

Think briefly, then end with a line holding only the grade: an integer from 0 (wrong) to
{max_score} (fully right)."""
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def parse_grade(reply: str, max_score: float) -> float | None:
    """The last number of `reply` when it lies in [0, max_score], else None."""
    numbers = NUMBER.findall(reply)
    if not numbers:
        return None
    grade = float(numbers[-1])
    return grade if 0 <= grade <= max_score else None


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None,
    reward_router_address: str,
    reward_model_tokenizer: Any = None,
    max_score: float = 10,
    temperature: float = 0.0,
    max_tokens: int = 512,
) -> dict[str, float]:
    info = extra_info or {}
    prompt = PROMPT.format(
        question=info.get("question", ""),
        reference="" if ground_truth is None else ground_truth,
        answer=solution_str,
        max_score=int(max_score),
    )
    request = {
        "model": "judge",
        "messages": [{"role": "user", "content": prompt}],
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    url = f"http://{reward_router_address}/v1/chat/completions"
    body = json.dumps(request).encode()
    headers = {"Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(url, body, headers)) as response:
        reply = json.loads(response.read())["choices"][0]["message"]["content"]
    grade = parse_grade(reply, max_score)
    return {
        "score": 0.0 if grade is None else grade / max_score,
        "judge_parsed": float(grade is not None),
    }
