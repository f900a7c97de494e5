"""Write GSM8K-format parquet files of synthetic arithmetic word problems (no download).

    python examples/data/make_arith.py --out-dir examples/data/arith --train-size 400
    python examples/data/make_arith.py --format jsonl --prompt-column messages   # ROLL-style

Rows use verl's schema with data_source="kuberl/arith"; the same seed always writes the same rows.
``--format jsonl`` writes the same rows as JSON lines, with the chat messages in the column
``--prompt-column`` names (ROLL reads ``messages``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from kuberl_runtime.testing.arith import DIFFICULTIES, write_arith_dataset

DEFAULT_OUT_DIR = Path(__file__).resolve().parent / "arith"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument("--train-size", type=int, default=400)
    parser.add_argument("--test-size", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--difficulty",
        type=int,
        choices=DIFFICULTIES,
        default=1,
        help="1: one +/- step; 2: two steps with *; 3: three steps with /",
    )
    parser.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    parser.add_argument(
        "--prompt-column", default="prompt", help="column holding the chat messages (jsonl only)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.format == "jsonl":
        with tempfile.TemporaryDirectory() as scratch:
            parquet = _write(args, Path(scratch))
            paths = {split: _to_jsonl(path, args) for split, path in parquet.items()}
    else:
        paths = _write(args, args.out_dir)
    for split, path in paths.items():
        print(f"{split}: {_num_rows(path)} rows, {path.stat().st_size} bytes -> {path}")


def _num_rows(path: Path) -> int:
    if path.suffix == ".jsonl":
        return sum(1 for _ in path.open(encoding="utf-8"))
    return pq.read_metadata(path).num_rows


def _write(args: argparse.Namespace, out_dir: Path) -> dict[str, Path]:
    return write_arith_dataset(
        out_dir,
        train_size=args.train_size,
        test_size=args.test_size,
        seed=args.seed,
        difficulty=args.difficulty,
    )


def _to_jsonl(parquet: Path, args: argparse.Namespace) -> Path:
    out = args.out_dir / f"{parquet.stem}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for row in pq.read_table(parquet).to_pylist():
            row[args.prompt_column] = row.pop("prompt")
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return out


if __name__ == "__main__":
    main()
