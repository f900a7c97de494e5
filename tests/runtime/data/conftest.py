"""Shared fixtures for data tests: the committed tiny tokenizer and a row writer. No downloads."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

# Set before transformers is imported by any test so nothing ever reaches the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TOKENIZER_DIR = Path(__file__).resolve().parents[3] / "examples" / "tokenizer" / "arith-tokenizer"


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


@pytest.fixture
def make_row() -> Callable[..., dict[str, Any]]:
    """A verl-schema row; keyword arguments add or override columns."""

    def make(prompt: Any, answer: str = "1", index: int = 0, **columns: Any) -> dict[str, Any]:
        return {
            "data_source": "kuberl/arith",
            "prompt": prompt,
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": answer},
            "extra_info": {"split": "train", "index": index},
            **columns,
        }

    return make


@pytest.fixture
def write_parquet(tmp_path: Path) -> Callable[..., Path]:
    def write(rows: list[dict[str, Any]], name: str = "data.parquet") -> Path:
        path = tmp_path / name
        pq.write_table(pa.Table.from_pylist(rows), path)
        return path

    return write
