"""Write the tool-use demo's data in verl's tool-agent format (no download).

    python examples/data/make_tool_calls.py --out-dir .demo-tool/data

``sft/train.parquet``: conversations (verl's ``messages``) on products with a first factor of
500-999, 30% of them calling the calculator. ``rl/train.jsonl`` and ``rl/test.jsonl``: prompts
with a first factor of 100-499, each row ``agent_name: tool_agent`` and
``extra_info.tools_kwargs.calculator`` as verl's ``gsm8k_tool_agent_loop.py`` writes them,
``reward_model.ground_truth`` the product. The same seed always writes the same rows.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kuberl_runtime.testing.tool_calls import write_tool_datasets


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=Path(".demo-tool/data"))
    parser.add_argument("--sft-size", type=int, default=2000)
    parser.add_argument("--rl-size", type=int, default=512)
    parser.add_argument("--test-size", type=int, default=64)
    parser.add_argument("--tool-fraction", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    paths = write_tool_datasets(
        args.out_dir,
        sft_size=args.sft_size,
        rl_size=args.rl_size,
        test_size=args.test_size,
        tool_fraction=args.tool_fraction,
        seed=args.seed,
    )
    for name, path in paths.items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
