"""``kuberl export CHECKPOINT [-o DIR]``: a merged Hugging Face model from a training checkpoint.

CHECKPOINT is a ``global_step_N`` directory, or a checkpoint root (``trainer.default_local_dir``)
whose latest complete step is used.
"""

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", metavar="CHECKPOINT", help="global_step_N dir or its parent")
    parser.add_argument(
        "-o", "--output", help="target directory (default: <CHECKPOINT>/huggingface_merged)"
    )


def run(args: argparse.Namespace) -> int:
    from kuberl_runtime.checkpoint.export import export_checkpoint
    from kuberl_runtime.checkpoint.manager import CheckpointManager
    from kuberl_runtime.distributed import RankInfo

    path = Path(args.checkpoint)
    if not path.name.startswith("global_step_"):
        step = CheckpointManager(path, RankInfo(0, 1, 0)).latest_step()
        if step is None:
            print(f"{path}: no complete checkpoint found", file=sys.stderr)
            return 1
        path = path / f"global_step_{step}"
    if not (path / "config.json").is_file():
        print(f"{path}: not a kuberl checkpoint (no config.json)", file=sys.stderr)
        return 1
    target = Path(args.output) if args.output else path / "huggingface_merged"
    export_checkpoint(path, target)
    print(f"exported {path} to {target}")
    return 0
