"""The command line the demos share: ``python -m kuberl_runtime.<demo> OUT_DIR [--seed N]``.

Each demo module (``demo_learning``, ``demo_tool``) brings its ``run_demo(out_dir, seed=...)``,
whose result's ``report()`` is what the command prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Protocol


class Reportable(Protocol):
    def report(self) -> str: ...


class RunDemo(Protocol):
    def __call__(self, out_dir: str | Path, *, seed: int = 0) -> Reportable: ...


def demo_main(doc: str | None, run_demo: RunDemo, argv: list[str] | None = None) -> int:
    """Parse OUT_DIR and --seed, run the demo, write its report to stdout; the exit status.

    ``doc``: the demo module's docstring, whose first line describes the command."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sys.stdout.write(run_demo(args.out_dir, seed=args.seed).report() + "\n")
    return 0
