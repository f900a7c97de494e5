"""Read verl-schema rows from parquet, JSON, JSONL or CSV files.

Every row keeps where it came from (path, row number) so later errors can point at it.
Nested columns (`prompt`, `reward_model`, `extra_info`) come back as Python lists/dicts from
every format: CSV cells holding JSON are decoded, and dotted CSV headers such as
`reward_model.ground_truth` are folded back into nested dicts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from kuberl_runtime.data.errors import DataError

logger = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = (".parquet", ".json", ".jsonl", ".csv")


@dataclass(frozen=True)
class SourceRow:
    """One record and its origin: `row` counts from 0 within `path`."""

    path: str
    row: int
    record: dict[str, Any]


def as_path_list(files: str | Path | Sequence[str | Path]) -> list[str]:
    """verl accepts one path or a list of paths for data.train_files / data.val_files."""
    if isinstance(files, (str, Path)):
        return [str(files)]
    paths = [str(f) for f in files]
    if not paths:
        raise DataError("no data files given: set data.train_files / data.val_files")
    return paths


def read_rows(files: str | Path | Sequence[str | Path]) -> list[SourceRow]:
    """All rows of all files, in file order then row order."""
    rows: list[SourceRow] = []
    for path in as_path_list(files):
        records = _read_records(path)
        rows.extend(SourceRow(path, i, record) for i, record in enumerate(records))
        logger.info("read %d rows from %s", len(records), path)
    return rows


def _read_records(path: str) -> list[dict[str, Any]]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(f"data file not found: {path}")
    try:
        return _read_by_suffix(file, path)
    except pa.ArrowInvalid as err:
        raise DataError(f"cannot read data file {path}: {err}") from err


def _read_by_suffix(file: Path, path: str) -> list[dict[str, Any]]:
    suffix = file.suffix.lower()
    if suffix == ".parquet":
        return pq.read_table(file).to_pylist()
    if suffix == ".jsonl":
        return _read_jsonl(file)
    if suffix == ".json":
        return _read_json(file)
    if suffix == ".csv":
        return _read_csv(file)
    raise DataError(
        f"unsupported data file type {suffix!r} for {path}: "
        f"use one of {', '.join(SUPPORTED_SUFFIXES)}"
    )


def _read_jsonl(file: Path) -> list[dict[str, Any]]:
    if file.stat().st_size == 0:
        return []
    return pa_json.read_json(file).to_pylist()


def _read_json(file: Path) -> list[dict[str, Any]]:
    """A `.json` file is one JSON array of objects, or JSON lines (what HF `to_json` writes)."""
    text = file.read_text(encoding="utf-8")
    if not text.lstrip().startswith("["):
        return _read_jsonl(file)
    try:
        records = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataError(f"cannot parse {file} as JSON: {err}") from err
    if not all(isinstance(r, dict) for r in records):
        raise DataError(f"{file} must hold a JSON array of objects (one object per row)")
    if not records:
        return []
    # Round-trip through Arrow so types and missing keys (as None) match the other formats;
    # pa.array infers the union of keys over all rows, Table.from_pylist only the first row's.
    return pa.Table.from_struct_array(pa.array(records)).to_pylist()


def _read_csv(file: Path) -> list[dict[str, Any]]:
    # Every cell is read as text: type inference would turn ground truth "3" into 3.0.
    names = pa_csv.open_csv(file).schema.names
    options = pa_csv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()))
    return [
        _decode_csv_record(r) for r in pa_csv.read_csv(file, convert_options=options).to_pylist()
    ]


def _decode_csv_record(record: dict[str, Any]) -> dict[str, Any]:
    decoded: dict[str, Any] = {}
    for key, value in record.items():
        value = _maybe_json(value)
        head, dot, tail = key.partition(".")
        if dot:
            decoded.setdefault(head, {})[tail] = value
        else:
            decoded[key] = value
    return decoded


def _maybe_json(value: Any) -> Any:
    # CSV has no nested types, so lists/dicts are stored as JSON text; anything else stays a string.
    if not isinstance(value, str) or value[:1] not in ("[", "{"):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value
