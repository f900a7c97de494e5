"""A model that visibly learns: SFT warm-start, then GRPO, on synthetic arithmetic, on CPU.

    python -m kuberl_runtime.demo_learning OUT_DIR      # prints accuracy before/after each stage

Three `kuberl train` runs of real job files (``examples/demo-sft.yaml`` and
``examples/demo-grpo.yaml``, paths rewritten into OUT_DIR):

1. the random-init tiny Qwen2 is scored on the validation problems (greedy, ``val_only``),
   beside
2. SFT on worked solutions (``a + b = c`` then ``#### c``) teaches the answer format and some
   arithmetic, and exports ``sft/huggingface``;
3. GRPO starts from that export (``model.path``), scores it before training (accuracy after SFT),
   trains on the exact-answer reward and scores again at the end (accuracy after GRPO).

`run_demo` returns the numbers; the lead's ``make demo`` and
``tests/runtime/sft/test_demo_learning.py`` call it. Everything lives under OUT_DIR: data,
models, each stage's checkpoints, logs and curves.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kuberl_runtime.demo_cli import demo_main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SFT_JOB = EXAMPLES / "demo-sft.yaml"
GRPO_JOB = EXAMPLES / "demo-grpo.yaml"
TOKENIZER_DIR = EXAMPLES / "tokenizer" / "arith-tokenizer"
TESTING = Path(__file__).resolve().parent / "testing"  # the model and data generators
# One intra-op thread per training process (why: `kuberl_train`).
DEMO_THREADS = "1"


@dataclass
class DemoResult:
    accuracy_before_sft: float
    accuracy_after_sft: float
    accuracy_after_grpo: float
    rewards: list[float]
    """GRPO's training reward (critic/score/mean) per step."""
    sft_losses: list[float]
    seconds: dict[str, float] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)

    @property
    def reward_gain(self) -> float:
        """Mean training reward over the last 5 GRPO steps minus over the first 5."""
        first, last = self.rewards[:5], self.rewards[-5:]
        return sum(last) / len(last) - sum(first) / len(first)

    def report(self) -> str:
        lines = [
            f"validation accuracy  before SFT: {self.accuracy_before_sft:.2f}",
            f"validation accuracy  after SFT:  {self.accuracy_after_sft:.2f}",
            f"validation accuracy  after GRPO: {self.accuracy_after_grpo:.2f}",
            f"GRPO training reward: first 5 steps {_mean(self.rewards[:5]):.2f} -> last 5 "
            f"steps {_mean(self.rewards[-5:]):.2f} (+{self.reward_gain:.2f})",
            f"SFT loss: {self.sft_losses[0]:.2f} -> {self.sft_losses[-1]:.2f}",
        ]
        lines += [f"{name}: {path}" for name, path in self.paths.items()]
        lines.append("time: " + ", ".join(f"{k} {v:.0f}s" for k, v in self.seconds.items()))
        return "\n".join(lines)


def _mean(values: list[float]) -> float:
    return sum(values) / max(len(values), 1)


def prepare(out: Path, seed: int = 0) -> dict[str, Path]:
    """The tiny random model and the data (SFT conversations, RL prompts, test) under `out`."""
    from transformers import AutoTokenizer

    from kuberl_runtime.testing.arith_sft import write_sum_datasets
    from kuberl_runtime.testing.tiny import save_tiny_model

    model = storage_paths(out)["model"]
    save_tiny_model(model, AutoTokenizer.from_pretrained(TOKENIZER_DIR), seed=seed)
    data = write_sum_datasets(out / "data", sft_size=2000, rl_size=1000, test_size=64, seed=seed)
    return {"model": model, **data}


def storage_paths(out: Path) -> dict[str, Path]:
    """Where `prepare` writes under `out` (the keys of its result)."""
    from kuberl_runtime.testing.arith_sft import sum_dataset_paths

    return {"model": out / "models" / "tiny-qwen2", **sum_dataset_paths(out / "data")}


def prepare_cached(out: Path, seed: int = 0) -> tuple[dict[str, Path], bool]:
    """`prepare`, skipped when `out` already holds its files for the same inputs: they are a
    pure function of the seed, this module (the sizes), the generators' sources, the tokenizer
    and the torch/transformers/pyarrow/safetensors versions (`storage_key`). Most of `prepare`'s
    time is importing torch and transformers. Returns the paths and whether they were reused."""
    key, stamp, paths = storage_key(seed), out / "storage.key", storage_paths(out)
    files = [paths["model"] / "config.json", *(p for k, p in paths.items() if k != "model")]
    if stamp.exists() and stamp.read_text() == key and all(f.exists() for f in files):
        return paths, True
    stamp.unlink(missing_ok=True)
    written = prepare(out, seed)
    assert written == paths, (written, paths)
    stamp.write_text(key)
    return paths, False


def storage_key(seed: int) -> str:
    from importlib.metadata import version

    sources = [Path(__file__), *(TESTING / f"{name}.py" for name in ("tiny", "arith", "arith_sft"))]
    sources += sorted(TOKENIZER_DIR.iterdir())
    digest = hashlib.sha256(f"seed={seed}".encode())
    for package in ("torch", "transformers", "pyarrow", "safetensors"):
        digest.update(f"{package}=={version(package)}".encode())
    for path in sources:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def job(template: Path, changes: dict[str, Any]) -> dict[str, Any]:
    tree = yaml.safe_load(template.read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        node = tree
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return tree


def kuberl_train(tree: dict[str, Any], path: Path, env: dict[str, str] | None = None) -> None:
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    cmd = [sys.executable, "-m", "kuberl_cli.main", "train", str(path)]
    environ = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # The demo's outcome on its seed is pinned (tests/runtime/sft/test_demo_learning.py) with
        # one intra-op thread: another count splits the float reductions differently and moves
        # the tiny model's learning curve. Fixed here so the caller's OMP_NUM_THREADS cannot move
        # it. One, not two: on 2 loaded cores two threads wait on each other at every op (SFT
        # steps 0.3-1.3 s instead of 0.12 s), and the random model is scored beside SFT.
        "OMP_NUM_THREADS": DEMO_THREADS,
    }
    done = subprocess.run(cmd, env={**environ, **(env or {})}, capture_output=True, text=True)
    (path.parent / f"{path.stem}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"kuberl train {path} failed:\n{done.stderr[-3000:]}")


def read_metrics(out_dir: Path) -> dict[int, dict[str, float]]:
    steps: dict[int, dict[str, float]] = {}
    for line in (out_dir / "logs" / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        steps.setdefault(record.pop("step"), {}).update(record)
    return steps


def accuracy(metrics: dict[str, float]) -> float:
    (value,) = [v for k, v in metrics.items() if k.startswith("val-core/") and "/reward/" in k]
    return value


def grpo_job(data: dict[str, Path], model: Path | str, local_dir: str) -> dict[str, Any]:
    """examples/demo-grpo.yaml on `data`'s RL files, from `model`, writing to `local_dir`."""
    return job(
        GRPO_JOB,
        {
            "data.train_files": str(data["rl_train"]),
            "data.val_files": str(data["rl_test"]),
            "actor_rollout_ref.model.path": str(model),
            "trainer.default_local_dir": local_dir,
        },
    )


def score_base(out: Path, data: dict[str, Path]) -> float:
    """The random model's validation accuracy (a `val_only` GRPO run under out/base)."""
    base = grpo_job(data, data["model"], str(out / "base"))
    kuberl_train(job_with(base, trainer={"val_only": True}), out / "base.yaml")
    return accuracy(read_metrics(out / "base")[0])


def sft_job(data: dict[str, Path], model: Path | str, local_dir: str) -> dict[str, Any]:
    """examples/demo-sft.yaml on `data`'s SFT files, from `model`, writing to `local_dir` (an
    RLTrainingJob's spec.sft_config as it is, with a relative `local_dir`)."""
    return job(
        SFT_JOB,
        {
            "data.train_files": str(data["sft_train"]),
            "data.val_files": str(data["sft_test"]),
            "model.path": str(model),
            "trainer.default_local_dir": local_dir,
        },
    )


def run_sft(out: Path, data: dict[str, Path]) -> list[float]:
    """examples/demo-sft.yaml from the random model; exports out/sft/huggingface. Its losses."""
    sft = sft_job(data, data["model"], str(out / "sft"))
    kuberl_train(sft, out / "sft.yaml")
    steps = read_metrics(out / "sft")
    return [steps[s]["train/loss"] for s in sorted(steps)]


def warm_start(out: Path, data: dict[str, Path]) -> tuple[float, list[float]]:
    """The random model's validation accuracy and SFT's losses: two independent one-thread
    processes, run side by side (each reads only the random model and its own data)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        before = pool.submit(score_base, out, data)
        losses = pool.submit(run_sft, out, data)
        return before.result(), losses.result()


def grpo_outcome(steps: dict[int, dict[str, float]]) -> tuple[float, float, list[float]]:
    """Accuracy before and after GRPO (validation at step 0 and at the end) and its rewards."""
    rewards = [steps[s]["critic/score/mean"] for s in sorted(steps) if s > 0]
    return accuracy(steps[0]), accuracy(steps[max(steps)]), rewards


def run_demo(out_dir: str | Path, *, seed: int = 0) -> DemoResult:
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    started = time.monotonic()
    data = prepare(out, seed)
    seconds["prepare"] = time.monotonic() - started

    mark = time.monotonic()
    before, sft_losses = warm_start(out, data)
    seconds["score base + sft"] = time.monotonic() - mark

    mark = time.monotonic()
    grpo = grpo_job(data, out / "sft" / "huggingface", str(out / "grpo"))
    kuberl_train(grpo, out / "grpo.yaml")
    after_sft, after_grpo, rewards = grpo_outcome(read_metrics(out / "grpo"))
    seconds["grpo"] = time.monotonic() - mark
    seconds["total"] = time.monotonic() - started
    return DemoResult(
        accuracy_before_sft=before,
        accuracy_after_sft=after_sft,
        accuracy_after_grpo=after_grpo,
        rewards=rewards,
        sft_losses=sft_losses,
        seconds=seconds,
        paths={
            "SFT model": str(out / "sft" / "huggingface"),
            "GRPO model": str(out / "grpo" / "huggingface"),
            "SFT curves": str(out / "sft" / "logs" / "curves.png"),
            "GRPO curves": str(out / "grpo" / "logs" / "curves.png"),
        },
    )


def job_with(tree: dict[str, Any], **sections: dict[str, Any]) -> dict[str, Any]:
    for name, values in sections.items():
        tree.setdefault(name, {}).update(values)
    return tree


def main(argv: list[str] | None = None) -> int:
    return demo_main(__doc__, run_demo, argv)


if __name__ == "__main__":
    sys.exit(main())
