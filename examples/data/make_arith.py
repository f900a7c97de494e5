"""Write GSM8K-format parquet files of synthetic arithmetic word problems (no download).

    python examples/data/make_arith.py --out-dir examples/data/arith --train-size 400

Rows use verl's schema with data_source="kuberl/arith"; the same seed always writes the same rows.
"""

from __future__ import annotations

import argparse
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    paths = write_arith_dataset(
        args.out_dir,
        train_size=args.train_size,
        test_size=args.test_size,
        seed=args.seed,
        difficulty=args.difficulty,
    )
    for split, path in paths.items():
        rows = pq.read_metadata(path).num_rows
        print(f"{split}: {rows} rows, {path.stat().st_size} bytes -> {path}")


if __name__ == "__main__":
    main()
