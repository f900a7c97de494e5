from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kuberl_runtime.rewards import default_compute_score
from kuberl_runtime.testing.arith import (
    DATA_SOURCE,
    INSTRUCTION,
    build_arith_rows,
    generate_problem,
    write_arith_dataset,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
ARITH_DIR = REPO_ROOT / "examples" / "data" / "arith"

# Written independently of the generator: sentence pattern -> operation on the running count.
_STEPS = [
    (re.compile(r"(?:buys|finds) (\d+) more"), lambda v, n: v + n),
    (re.compile(r"(?:gives away|loses) (\d+) "), lambda v, n: v - n),
    (re.compile(r"then has (\d+) times as many"), lambda v, n: v * n),
    (re.compile(r"into (\d+) equal groups and keeps one group"), lambda v, n: v / n),
]


def _solve(question: str) -> float:
    sentences = question.split(". ")
    value = float(re.match(r"\w+ has (\d+) ", sentences[0]).group(1))
    for sentence in sentences[1:-1]:
        matches = [(op, p.search(sentence)) for p, op in _STEPS if p.search(sentence)]
        assert len(matches) == 1, sentence
        op, match = matches[0]
        value = op(value, int(match.group(1)))
    assert sentences[-1].startswith("How many")
    return value


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_ground_truth_is_the_arithmetic_of_the_question(difficulty: int) -> None:
    rows = build_arith_rows(200, seed=3, difficulty=difficulty, split="train")
    for row in rows:
        truth = row["reward_model"]["ground_truth"]
        assert _solve(row["extra_info"]["question"]) == int(truth)
        assert int(truth) >= 0


def test_rows_follow_the_gsm8k_schema() -> None:
    rows = build_arith_rows(5, seed=0, difficulty=2, split="test")
    for index, row in enumerate(rows):
        assert set(row) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
        assert row["data_source"] == DATA_SOURCE == "kuberl/arith"
        [message] = row["prompt"]
        assert message["role"] == "user"
        assert message["content"] == f"{row['extra_info']['question']} {INSTRUCTION}"
        assert row["reward_model"]["style"] == "rule"
        assert row["extra_info"]["split"] == "test"
        assert row["extra_info"]["index"] == index


def test_worked_answer_scores_full_marks_with_the_registry() -> None:
    for row in build_arith_rows(50, seed=1, difficulty=3, split="train"):
        score = default_compute_score(
            row["data_source"], row["extra_info"]["answer"], row["reward_model"]["ground_truth"]
        )
        assert score == 1.0


def test_generation_is_deterministic_per_seed() -> None:
    assert build_arith_rows(20, seed=4, difficulty=2, split="train") == build_arith_rows(
        20, seed=4, difficulty=2, split="train"
    )
    assert build_arith_rows(20, seed=4, difficulty=2, split="train") != build_arith_rows(
        20, seed=5, difficulty=2, split="train"
    )


def test_unknown_difficulty_is_rejected() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        generate_problem(random.Random(0), 4)


def test_written_splits_are_disjoint(tmp_path: Path) -> None:
    paths = write_arith_dataset(tmp_path, train_size=300, test_size=100, seed=0, difficulty=1)
    train = pq.read_table(paths["train"]).to_pylist()
    test = pq.read_table(paths["test"]).to_pylist()
    assert (len(train), len(test)) == (300, 100)
    train_q = {r["extra_info"]["question"] for r in train}
    assert not train_q & {r["extra_info"]["question"] for r in test}


def test_committed_fixture_matches_the_generator(tmp_path: Path) -> None:
    # If this fails, rerun examples/data/make_arith.py and commit its output.
    paths = write_arith_dataset(tmp_path)
    for split in ("train", "test"):
        committed = pq.read_table(ARITH_DIR / f"{split}.parquet").to_pylist()
        assert committed == pq.read_table(paths[split]).to_pylist(), split


def test_cli_writes_requested_sizes(tmp_path: Path) -> None:
    script = REPO_ROOT / "examples" / "data" / "make_arith.py"
    result = subprocess.run(
        [
            sys.executable,
            str(script),
            "--out-dir",
            str(tmp_path),
            "--train-size",
            "12",
            "--test-size",
            "4",
            "--difficulty",
            "3",
            "--seed",
            "9",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT / "runtime")},
    )
    assert "train: 12 rows" in result.stdout
    assert pq.read_metadata(tmp_path / "test.parquet").num_rows == 4
