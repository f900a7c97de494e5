"""Write the demo's tiny random-init Qwen2 model (2 layers, hidden 64) as a model directory.

    python examples/make_tiny_model.py            # -> .demo/models/tiny-qwen2

It uses the local arithmetic tokenizer (examples/tokenizer/arith-tokenizer), so nothing is
downloaded. `examples/demo.yaml` points `actor_rollout_ref.model.path` at the output.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from transformers import AutoTokenizer

from kuberl_runtime.testing.tiny import save_tiny_model

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT_DIR = ROOT / ".demo" / "models" / "tiny-qwen2"
TOKENIZER_DIR = ROOT / "examples" / "tokenizer" / "arith-tokenizer"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    args = parser.parse_args(argv)
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    out = save_tiny_model(
        args.out_dir, tokenizer, seed=args.seed, num_layers=args.layers, hidden=args.hidden
    )
    print(f"tiny model saved to {out}")


if __name__ == "__main__":
    main()
