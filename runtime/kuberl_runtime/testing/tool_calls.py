"""The tool-use demo's data: multiplications a tiny model cannot do in its head, a calculator.

Rows are verl's (``examples/data_preprocess/gsm8k_tool_agent_loop.py``): the question as the
prompt, ``agent_name: tool_agent``, ``extra_info.tools_kwargs.calculator`` and the product as
``reward_model.ground_truth``. The SFT conversations (verl's ``messages`` column) come from a
*different* distribution than the RL and test rows: their first factor is drawn from 500-999,
the RL and test rows' from 100-499 (second factor 10-99 in both), and only some of them call
the calculator (the others answer with a guess), so the warmed-up model knows the call's format
but mostly guesses.

The tokenizer is the arithmetic tokenizer with the hermes call's fixed parts as tokens
(``TOOL_TOKENS``): a call is then 11 tokens, 7 of them copied from the question, a pattern a
tiny model learns in a few hundred SFT steps (spelled out in characters it is 75 tokens).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

DATA_SOURCE = "kuberl/tool-arith"
TOOL = "calculator"
CALL_PREFIX = '{"name": "calculator", "arguments": {"expression": "'
CALL_SUFFIX = '"}}'
TOOL_TOKENS = ("<tool_call>", "</tool_call>", CALL_PREFIX, CALL_SUFFIX)
# SFT on the larger factors: their five-digit products start with every digit, so the model
# learns to copy the tool's answer rather than recall a likely one (SFT on 100-499, whose
# products never start with 5-9 in five digits, wrote that digit from memory on the 500-999
# test problems: 0 of 20 answers copied, while 18 of 20 calls were). Four-digit products
# below 5,000 (part of the test set) still start with a digit SFT never saw in that place.
SFT_FIRST = (500, 999)
RL_FIRST = (100, 499)
SECOND = (10, 99)


def tool_tokenizer(base_dir: str | Path) -> Any:
    """The tokenizer at ``base_dir`` with ``TOOL_TOKENS`` added (decoded back verbatim)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    tokenizer.add_tokens(list(TOOL_TOKENS))
    return tokenizer


def question(a: int, b: int) -> str:
    return f"What is {a} * {b}?"


def tool_call(a: int, b: int) -> str:
    """The hermes call of the calculator on ``a * b``, as the policy writes it."""
    return f"<tool_call>{CALL_PREFIX}{a} * {b}{CALL_SUFFIX}</tool_call>"


def _factors(rng: random.Random, first: tuple[int, int]) -> tuple[int, int]:
    return rng.randint(*first), rng.randint(*SECOND)


def rl_rows(num_rows: int, *, seed: int, split: str) -> list[dict[str, Any]]:
    """Distinct RL rows (first factor 100-499) in verl's tool-agent format."""
    rng = random.Random(f"{seed}-{split}-tool")
    rows: list[dict[str, Any]] = []
    seen: set[tuple[int, int]] = set()
    while len(rows) < num_rows:
        a, b = _factors(rng, RL_FIRST)
        if (a, b) in seen:
            continue
        seen.add((a, b))
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "agent_name": "tool_agent",
                "prompt": [{"role": "user", "content": question(a, b)}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a * b)},
                "extra_info": {
                    "split": split,
                    "index": len(rows),
                    "question": question(a, b),
                    "tools_kwargs": {TOOL: {"create_kwargs": {}}},
                },
            }
        )
    return rows


def sft_rows(num_rows: int, *, seed: int, tool_fraction: float) -> list[dict[str, Any]]:
    """Conversations (first factor 500-999): a ``tool_fraction`` of them call the calculator,
    read its answer and copy it; the others answer at once with a wrong guess (within 10%)."""
    rng = random.Random(f"{seed}-sft-tool")
    rows = []
    for _ in range(num_rows):
        a, b = _factors(rng, SFT_FIRST)
        messages = [{"role": "user", "content": question(a, b)}]
        if rng.random() < tool_fraction:
            messages += [
                {"role": "assistant", "content": tool_call(a, b)},
                {"role": "tool", "content": str(a * b)},
                {"role": "assistant", "content": f"#### {a * b}"},
            ]
        else:
            guess = a * b + rng.choice((-1, 1)) * rng.randint(1, a * b // 10)
            messages.append({"role": "assistant", "content": f"#### {guess}"})
        rows.append({"messages": messages, "data_source": DATA_SOURCE})
    return rows


def write_tool_datasets(
    out_dir: str | Path,
    *,
    sft_size: int,
    rl_size: int,
    test_size: int,
    tool_fraction: float,
    seed: int = 0,
) -> dict[str, Path]:
    """``sft/train.parquet``, ``rl/train.jsonl`` and ``rl/test.jsonl`` under ``out_dir``; test
    questions appear in neither train set (the SFT set's factors never overlap them). The RL
    rows are JSON lines: Parquet cannot store the calculator's empty ``create_kwargs``."""
    out = Path(out_dir)
    test = rl_rows(test_size, seed=seed, split="test")
    held_out = {row["extra_info"]["question"] for row in test}
    train = [r for r in rl_rows(rl_size + test_size, seed=seed, split="train")]
    train = [r for r in train if r["extra_info"]["question"] not in held_out][:rl_size]
    tables = {
        "sft_train": sft_rows(sft_size, seed=seed, tool_fraction=tool_fraction),
        "rl_train": train,
        "rl_test": test,
    }
    paths = {
        "sft_train": out / "sft" / "train.parquet",
        "rl_train": out / "rl" / "train.jsonl",
        "rl_test": out / "rl" / "test.jsonl",
    }
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(tables["sft_train"]), paths["sft_train"])
    for key in ("rl_train", "rl_test"):
        lines = [json.dumps(row) + "\n" for row in tables[key]]
        paths[key].write_text("".join(lines), encoding="utf-8")
    return paths
