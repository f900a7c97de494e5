"""The synthetic arithmetic problems as SFT conversations (verl's ``messages`` column).

Each row is the RL prompt (question + instruction) answered by the worked solution that ends in
``#### N``, so a model fine-tuned on them answers in the format the GSM8K-style scorer reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kuberl_runtime.testing.arith import build_arith_rows


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
