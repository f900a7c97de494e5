from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from kuberl_runtime.data import DataError, read_rows
from kuberl_runtime.data.files import as_path_list


def make_row(prompt: list[dict[str, str]], answer: str, index: int) -> dict:
    return {
        "data_source": "kuberl/arith",
        "prompt": prompt,
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": answer},
        "extra_info": {"split": "train", "index": index},
    }


ROWS = [
    make_row([{"role": "user", "content": "Ava has 3 apples."}], "3", index=0),
    make_row(
        [{"role": "system", "content": "s"}, {"role": "user", "content": 'u, "q"'}], "-4.5", 1
    ),
]


def _records(path: Path) -> list[dict]:
    return [r.record for r in read_rows(path)]


def _write_csv(path: Path, rows: list[dict], dotted: bool) -> None:
    with path.open("w", newline="") as f:
        if dotted:
            fields = [
                "data_source",
                "prompt",
                "ability",
                "reward_model.style",
                "reward_model.ground_truth",
                "extra_info",
            ]
        else:
            fields = list(rows[0])
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            flat = {k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()}
            if dotted:
                del flat["reward_model"]
                flat["reward_model.style"] = row["reward_model"]["style"]
                flat["reward_model.ground_truth"] = row["reward_model"]["ground_truth"]
            writer.writerow(flat)


def test_parquet_rows_round_trip(write_parquet) -> None:
    assert _records(write_parquet(ROWS)) == ROWS


def test_jsonl_equals_parquet(tmp_path: Path, write_parquet) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert _records(path) == _records(write_parquet(ROWS))


@pytest.mark.parametrize("as_array", [True, False])
def test_json_equals_parquet(tmp_path: Path, write_parquet, as_array: bool) -> None:
    path = tmp_path / "d.json"
    text = json.dumps(ROWS) if as_array else "\n".join(json.dumps(r) for r in ROWS)
    path.write_text(text)
    assert _records(path) == _records(write_parquet(ROWS))


@pytest.mark.parametrize("dotted", [False, True])
def test_csv_nested_cells_are_decoded(tmp_path: Path, dotted: bool) -> None:
    path = tmp_path / "d.csv"
    _write_csv(path, ROWS, dotted)
    records = _records(path)
    assert [r["prompt"] for r in records] == [r["prompt"] for r in ROWS]
    assert [r["extra_info"] for r in records] == [r["extra_info"] for r in ROWS]
    # Cells stay text: CSV type inference would have turned "3" into 3.0.
    assert [r["reward_model"]["ground_truth"] for r in records] == ["3", "-4.5"]
    assert [r["reward_model"]["style"] for r in records] == ["rule", "rule"]


def test_json_array_keeps_keys_missing_from_the_first_row(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps([{"prompt": "a"}, {"prompt": "b", "data_source": "s"}]))
    assert _records(path) == [
        {"prompt": "a", "data_source": None},
        {"prompt": "b", "data_source": "s"},
    ]


def test_rows_remember_path_and_row(write_parquet) -> None:
    first = write_parquet(ROWS, "a.parquet")
    second = write_parquet(ROWS[:1], "b.parquet")
    rows = read_rows([first, second])
    assert [(Path(r.path).name, r.row) for r in rows] == [
        ("a.parquet", 0),
        ("a.parquet", 1),
        ("b.parquet", 0),
    ]


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "train.parquet"
    with pytest.raises(DataError, match=r"not found: .*nope/train\.parquet"):
        read_rows([missing])


def test_unsupported_suffix_lists_supported(tmp_path: Path) -> None:
    path = tmp_path / "d.txt"
    path.write_text("x")
    with pytest.raises(DataError, match=r"'\.txt'.*\.parquet, \.json, \.jsonl, \.csv"):
        read_rows(path)


def test_empty_file_list_is_an_error() -> None:
    with pytest.raises(DataError, match="no data files"):
        as_path_list([])
