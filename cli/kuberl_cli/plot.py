"""``kuberl plot OUTPUT_DIR [-o PNG]``: redraw a run's learning curves from its metrics.jsonl.

OUTPUT_DIR is a job's af_output_dir (or a local run's output directory): the metrics are read from
``OUTPUT_DIR/logs/metrics.jsonl`` and the picture goes to ``OUTPUT_DIR/logs/curves.png``.
"""

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("output_dir", metavar="OUTPUT_DIR", help="af_output_dir of a run")
    parser.add_argument("-o", "--output", help="target PNG (default: OUTPUT_DIR/logs/curves.png)")
    parser.add_argument("--title", default="", help="a title above the panels")


def run(args: argparse.Namespace) -> int:
    from kuberl_runtime.tracking.curves import render_curves
    from kuberl_runtime.tracking.tracker import CURVES_FILE, METRICS_FILE

    logs = Path(args.output_dir) / "logs"
    metrics = logs / METRICS_FILE
    if not metrics.is_file():
        print(f"{metrics}: not found; is {args.output_dir} a run's output dir?", file=sys.stderr)
        return 1
    target = Path(args.output) if args.output else logs / CURVES_FILE
    if render_curves(metrics, target, args.title) is None:
        print(f"{metrics}: no metrics logged yet", file=sys.stderr)
        return 1
    print(f"wrote {target}")
    return 0
