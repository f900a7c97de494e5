"""Synthetic arithmetic word problems in GSM8K's parquet format — test and demo data, no download.

Each problem starts with a count and applies 1–3 steps, each a sentence with one number whose
verb fixes the operation: "buys/finds N more" (+), "gives away/loses N" (−), "then has K times as
many" (×), "splits ... into K equal groups and keeps one group" (÷, always exact). Answers are
non-negative integers; the ground truth is the answer as a string, scored like GSM8K (`#### N`).
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

DATA_SOURCE = "kuberl/arith"
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
DIFFICULTIES = (1, 2, 3)

_NAMES = ("Ava", "Ben", "Chen", "Dana", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo")
_ITEMS = ("apples", "marbles", "books", "stickers", "coins", "pencils", "cards", "shells")
# difficulty -> (number of steps, largest operand, allowed operations)
_LEVELS = {1: (1, 20, "+-"), 2: (2, 50, "+-*"), 3: (3, 100, "+-*/")}
_MAX_TRIES_PER_ROW = 50


@dataclass(frozen=True)
class ArithProblem:
    question: str
    answer: int
    solution: str  # worked steps ending in "#### <answer>", as a good response would


def generate_problem(rng: random.Random, difficulty: int) -> ArithProblem:
    if difficulty not in _LEVELS:
        raise ValueError(f"difficulty must be one of {DIFFICULTIES}, got {difficulty}")
    num_steps, largest, ops = _LEVELS[difficulty]
    name, items = rng.choice(_NAMES), rng.choice(_ITEMS)
    value = rng.randint(2, largest)
    sentences = [f"{name} has {value} {items}."]
    work: list[str] = []
    for _ in range(num_steps):
        op = rng.choice(ops)
        if op == "/" and not _divisors(value):
            op = "-"  # keep division exact: a prime count cannot be split evenly
        if op == "-" and value == 0:
            op = "+"  # nothing left to take away
        operand, sentence = _step(rng, op, value, largest, name, items)
        new_value = _apply(op, value, operand)
        work.append(f"{value} {op} {operand} = {new_value}")
        sentences.append(sentence)
        value = new_value
    sentences.append(f"How many {items} does {name} have now?")
    solution = "\n".join([*work, f"#### {value}"])
    return ArithProblem(" ".join(sentences), value, solution)


def _step(
    rng: random.Random, op: str, value: int, largest: int, name: str, items: str
) -> tuple[int, str]:
    if op == "+":
        n = rng.randint(1, largest)
        verb = rng.choice(("buys", "finds"))
        return n, f"{name} {verb} {n} more {items}."
    if op == "-":
        n = rng.randint(1, value)
        verb = rng.choice(("gives away", "loses"))
        return n, f"{name} {verb} {n} {items}."
    if op == "*":
        k = rng.randint(2, 5)
        return k, f"{name} then has {k} times as many {items}."
    k = rng.choice(_divisors(value))
    return k, f"{name} splits the {items} into {k} equal groups and keeps one group."


def _divisors(value: int) -> list[int]:
    return [k for k in range(2, 10) if value % k == 0]


def _apply(op: str, value: int, operand: int) -> int:
    if op == "+":
        return value + operand
    if op == "-":
        return value - operand
    if op == "*":
        return value * operand
    return value // operand


def build_arith_rows(
    num_rows: int,
    *,
    seed: int,
    difficulty: int,
    split: str,
    exclude_questions: Collection[str] = (),
) -> list[dict[str, Any]]:
    """`num_rows` verl-schema rows; questions in `exclude_questions` (e.g. train's) are skipped."""
    rng = random.Random(f"{seed}-{split}-{difficulty}")
    rows: list[dict[str, Any]] = []
    seen = set(exclude_questions)
    for _ in range(_MAX_TRIES_PER_ROW * num_rows):
        if len(rows) == num_rows:
            break
        problem = generate_problem(rng, difficulty)
        if problem.question in seen:
            continue
        seen.add(problem.question)
        rows.append(_row(problem, split, len(rows)))
    if len(rows) < num_rows:
        raise ValueError(f"only {len(rows)} distinct difficulty-{difficulty} problems found")
    return rows


def _row(problem: ArithProblem, split: str, index: int) -> dict[str, Any]:
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"{problem.question} {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(problem.answer)},
        "extra_info": {
            "split": split,
            "index": index,
            "question": problem.question,
            "answer": problem.solution,
        },
    }


def write_arith_dataset(
    out_dir: str | Path,
    *,
    train_size: int = 400,
    test_size: int = 100,
    seed: int = 0,
    difficulty: int = 1,
) -> dict[str, Path]:
    """Write `train.parquet` and `test.parquet` (test questions never appear in train)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train = build_arith_rows(train_size, seed=seed, difficulty=difficulty, split="train")
    train_questions = {row["extra_info"]["question"] for row in train}
    test = build_arith_rows(
        test_size, seed=seed, difficulty=difficulty, split="test", exclude_questions=train_questions
    )
    paths = {"train": out / "train.parquet", "test": out / "test.parquet"}
    for split, rows in (("train", train), ("test", test)):
        pq.write_table(pa.Table.from_pylist(rows), paths[split], compression="zstd")
    return paths
