"""The synthetic arithmetic problems as SFT conversations (verl's ``messages`` column).

Each row is the RL prompt (question + instruction) answered by the worked solution that ends in
``#### N``, so a model fine-tuned on them answers in the format the GSM8K-style scorer reads.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kuberl_runtime.testing.arith import DATA_SOURCE, INSTRUCTION, build_arith_rows

NAMES = ("Ava", "Ben", "Chen", "Dana", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo")
ITEMS = ("apples", "marbles", "books", "stickers", "coins", "pencils", "cards", "shells")


def sft_row(rl_row: dict[str, Any]) -> dict[str, Any]:
    prompt = rl_row["prompt"]
    answer = {"role": "assistant", "content": rl_row["extra_info"]["answer"]}
    return {"messages": [*prompt, answer], "data_source": rl_row["data_source"]}


def write_arith_sft_dataset(
    out_dir: str | Path,
    *,
    train_size: int = 400,
    test_size: int = 100,
    seed: int = 0,
    difficulty: int = 1,
    split_name: str = "sft",
) -> dict[str, Path]:
    """``train.parquet`` and ``test.parquet`` of conversations (test never repeats train)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train = build_arith_rows(train_size, seed=seed, difficulty=difficulty, split=split_name)
    seen = {row["extra_info"]["question"] for row in train}
    test = build_arith_rows(
        test_size,
        seed=seed,
        difficulty=difficulty,
        split=f"{split_name}-test",
        exclude_questions=seen,
    )
    paths = {"train": out / "train.parquet", "test": out / "test.parquet"}
    for split, rows in (("train", train), ("test", test)):
        table = pa.Table.from_pylist([sft_row(r) for r in rows])
        pq.write_table(table, paths[split], compression="zstd")
    return paths


def build_sum_rows(
    num_rows: int, *, seed: int, split: str, largest: int = 9, exclude: Collection[str] = ()
) -> list[dict[str, Any]]:
    """The smallest arithmetic task: one addition of two numbers up to `largest`, in the
    arithmetic problems' wording and verl row format (scored like GSM8K: ``#### N``)."""
    rng = random.Random(f"{seed}-{split}-sum{largest}")
    rows: list[dict[str, Any]] = []
    seen = set(exclude)
    for _ in range(50 * num_rows):
        if len(rows) == num_rows:
            break
        name, items = rng.choice(NAMES), rng.choice(ITEMS)
        a, b = rng.randint(1, largest), rng.randint(1, largest)
        question = (
            f"{name} has {a} {items}. {name} finds {b} more {items}. "
            f"How many {items} does {name} have now?"
        )
        if question in seen:
            continue
        seen.add(question)
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": f"{question} {INSTRUCTION}"}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {
                    "split": split,
                    "index": len(rows),
                    "question": question,
                    "answer": f"{a} + {b} = {a + b}\n#### {a + b}",
                },
            }
        )
    if len(rows) < num_rows:
        raise ValueError(f"only {len(rows)} distinct sums up to {largest} found")
    return rows


def write_sum_datasets(
    out_dir: str | Path, *, sft_size: int, rl_size: int, test_size: int, seed: int = 0
) -> dict[str, Path]:
    """The learning demo's data: SFT conversations, RL prompts and held-out test prompts (as RL
    rows and as conversations), all single additions; test questions appear in neither train."""
    out = Path(out_dir)
    test = build_sum_rows(test_size, seed=seed, split="test")
    held_out = {r["extra_info"]["question"] for r in test}
    sft = build_sum_rows(sft_size, seed=seed, split="sft", exclude=held_out)
    rl = build_sum_rows(rl_size, seed=seed, split="rl", exclude=held_out)
    tables = {
        "rl_train": rl,
        "rl_test": test,
        "sft_train": [sft_row(r) for r in sft],
        "sft_test": [sft_row(r) for r in test],
    }
    paths = sum_dataset_paths(out)
    for key, rows in tables.items():
        paths[key].parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), paths[key], compression="zstd")
    return paths


def sum_dataset_paths(out_dir: str | Path) -> dict[str, Path]:
    """Where `write_sum_datasets` writes each table: `<kind>_<split>` -> out/kind/split.parquet."""
    out = Path(out_dir)
    return {
        f"{kind}_{split}": out / kind / f"{split}.parquet"
        for kind in ("rl", "sft")
        for split in ("train", "test")
    }
