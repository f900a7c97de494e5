"""Write the VL demo's tiny random-init Qwen2.5-VL and its dot-counting image data.

    python examples/make_tiny_vl.py      # -> .demo/models/tiny-qwen2.5-vl, .demo/data/dots/

The model (2 layers, hidden 64, a 2-block vision encoder) and its processor are built from a
transformers config and the local arithmetic tokenizer plus Qwen2-VL's vision tokens; the data
are 56x56 pictures of 1-4 dots asking for the count (runtime/kuberl_runtime/testing/dots.py).
Nothing is downloaded. `examples/vl-demo.yaml` trains on them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kuberl_runtime.testing.dots import write_dot_datasets
from kuberl_runtime.testing.tiny_vl import save_tiny_vl

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL_DIR = ROOT / ".demo" / "models" / "tiny-qwen2.5-vl"
DEFAULT_DATA_DIR = ROOT / ".demo" / "data" / "dots"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=DEFAULT_MODEL_DIR)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    model = save_tiny_vl(args.model_dir, seed=args.seed)
    train, test = write_dot_datasets(args.data_dir, seed=args.seed)
    print(f"tiny Qwen2.5-VL saved to {model}; data: {train}, {test}")


if __name__ == "__main__":
    main()
