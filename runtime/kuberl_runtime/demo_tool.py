"""A model that learns to use a tool: SFT warm-start, then GRPO with a calculator, on CPU.

    python -m kuberl_runtime.demo_tool OUT_DIR   # prints accuracy and tool use before/after

Two `kuberl train` runs of real job files (``examples/demo-tool-sft.yaml`` and
``examples/demo-tool-grpo.yaml``, paths rewritten into OUT_DIR):

1. SFT of a tiny random-init Qwen2 on calculator transcripts of another distribution than the
   test problems (``testing/tool_calls.py``): 30% call the tool, the rest guess;
2. GRPO with the calculator tool (multi-turn rollouts, hermes calls) on 3-digit x 2-digit
   products, scored greedily before and after: accuracy and the share that called the tool.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kuberl_runtime.demo_cli import demo_main
from kuberl_runtime.demo_learning import EXAMPLES, TOKENIZER_DIR, job, kuberl_train, read_metrics

SFT_JOB = EXAMPLES / "demo-tool-sft.yaml"
GRPO_JOB = EXAMPLES / "demo-tool-grpo.yaml"
TOOL_CONFIG = EXAMPLES / "tools" / "calculator.yaml"
REWARD = EXAMPLES / "tool_demo_reward.py"
TOOL_FRACTION = 0.3
VAL = "kuberl/tool-arith"


@dataclass
class ToolDemoResult:
    accuracy_before: float
    accuracy_after: float
    tool_use_before: float
    tool_use_after: float
    rewards: list[float]
    """GRPO's training reward (critic/score/mean) per step."""
    tool_calls: list[float]
    """Calculator calls per rollout (tool/calculator/calls / rollouts) per GRPO step."""
    sft_losses: list[float]
    seconds: dict[str, float] = field(default_factory=dict)

    def report(self) -> str:
        return "\n".join(
            [
                f"validation accuracy  after SFT: {self.accuracy_before:.2f}  after GRPO: "
                f"{self.accuracy_after:.2f}",
                f"validation tool use  after SFT: {self.tool_use_before:.2f}  after GRPO: "
                f"{self.tool_use_after:.2f}",
                "GRPO training reward: " + " ".join(f"{r:.2f}" for r in self.rewards),
                "GRPO calls per rollout: " + " ".join(f"{c:.2f}" for c in self.tool_calls),
                f"SFT loss: {self.sft_losses[0]:.2f} -> {self.sft_losses[-1]:.2f}",
                "time: " + ", ".join(f"{k} {v:.0f}s" for k, v in self.seconds.items()),
            ]
        )


def prepare(out: Path, seed: int = 0) -> dict[str, Path]:
    """The tokenizer with the call's tokens, the tiny random model and the data under ``out``."""
    from kuberl_runtime.testing.tiny import save_tiny_model
    from kuberl_runtime.testing.tool_calls import tool_tokenizer, write_tool_datasets

    model = save_tiny_model(out / "models" / "tiny-qwen2", tool_tokenizer(TOKENIZER_DIR), seed=seed)
    data = write_tool_datasets(
        out / "data",
        sft_size=2000,
        rl_size=512,
        test_size=64,
        tool_fraction=TOOL_FRACTION,
        seed=seed,
    )
    return {"model": model, **data}


def run_sft(out: Path, data: dict[str, Path]) -> list[float]:
    tree = job(
        SFT_JOB,
        {
            "data.train_files": str(data["sft_train"]),
            "data.val_files": str(data["sft_train"]),
            "model.path": str(data["model"]),
            "trainer.default_local_dir": str(out / "sft"),
        },
    )
    kuberl_train(tree, out / "sft.yaml")
    steps = read_metrics(out / "sft")
    return [steps[s]["train/loss"] for s in sorted(steps) if "train/loss" in steps[s]]


def run_grpo(out: Path, data: dict[str, Path]) -> dict[int, dict[str, float]]:
    tree = job(
        GRPO_JOB,
        {
            "data.train_files": str(data["rl_train"]),
            "data.val_files": str(data["rl_test"]),
            "actor_rollout_ref.model.path": str(out / "sft" / "huggingface"),
            "actor_rollout_ref.rollout.multi_turn.tool_config_path": str(TOOL_CONFIG),
            "custom_reward_function.path": str(REWARD),
            "trainer.default_local_dir": str(out / "grpo"),
        },
    )
    kuberl_train(tree, out / "grpo.yaml")
    return read_metrics(out / "grpo")


def _val(metrics: dict[str, float], var: str) -> float:
    (value,) = [v for k, v in metrics.items() if k.startswith("val-") and f"{VAL}/{var}/" in k]
    return value


def run_demo(out_dir: str | Path, *, seed: int = 0) -> ToolDemoResult:
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    mark = started = time.monotonic()
    data = prepare(out, seed)
    seconds["prepare"] = time.monotonic() - mark
    mark = time.monotonic()
    losses = run_sft(out, data)
    seconds["sft"] = time.monotonic() - mark
    mark = time.monotonic()
    steps = run_grpo(out, data)
    seconds["grpo"] = time.monotonic() - mark
    seconds["total"] = time.monotonic() - started
    first, last = steps[0], steps[max(steps)]
    train = [steps[s] for s in sorted(steps) if s > 0]
    rollouts = 16 * 8  # data.train_batch_size x rollout.n in examples/demo-tool-grpo.yaml
    return ToolDemoResult(
        accuracy_before=_val(first, "acc"),
        accuracy_after=_val(last, "acc"),
        tool_use_before=_val(first, "tool_use"),
        tool_use_after=_val(last, "tool_use"),
        rewards=[m["critic/score/mean"] for m in train],
        tool_calls=[m.get("tool/calculator/calls", 0.0) / rollouts for m in train],
        sft_losses=losses,
        seconds=seconds,
    )


def main(argv: list[str] | None = None) -> int:
    return demo_main(__doc__, run_demo, argv)


if __name__ == "__main__":
    sys.exit(main())
