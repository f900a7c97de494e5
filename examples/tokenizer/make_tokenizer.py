"""Train the tiny arithmetic tokenizer locally and save it as a Hugging Face tokenizer directory.

    python examples/tokenizer/make_tokenizer.py --out-dir examples/tokenizer/arith-tokenizer

Byte-level BPE (any text round-trips), one token per digit, ChatML chat template, Qwen2-style
special tokens (`<|endoftext|>` pad, `<|im_end|>` eos). Load it with
`AutoTokenizer.from_pretrained(<out-dir>)`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kuberl_runtime.testing.tokenizer import DEFAULT_VOCAB_SIZE, save_arith_tokenizer

DEFAULT_OUT_DIR = Path(__file__).resolve().parent / "arith-tokenizer"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR)
    parser.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = save_arith_tokenizer(args.out_dir, vocab_size=args.vocab_size, seed=args.seed)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"tokenizer saved to {out} ({size} bytes)")


if __name__ == "__main__":
    main()
