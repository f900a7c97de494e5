"""CPU throughput of kuberl's GRPO loop next to TRL's GRPOTrainer, same model, data and batch.

    .venv/bin/pip install -e '.[bench]'      # trl, accelerate, datasets
    .venv/bin/python bench/runtime_cpu.py [--shapes tiny compute] [--steps 6] [--threads 1]

Two shapes, each with kuberl and TRL in the same run (alternating rounds, so drift hits both):
`tiny` (random-init Qwen2, 2 layers × hidden 64, 8 prompts × 4 samples, 32-token responses) and
`compute` (4 layers × hidden 256, 4 heads, 16 prompts × 4 samples, 128-token responses), where
the forward/backward FLOPs rather than per-step overhead dominate. Both frameworks run one
process on the CPU with the arithmetic tokenizer and prompts in the same chat template, at
temperature 1, one optimizer step per batch, a KL term to a reference model
(β = 0.001), padded (not packed) forward passes as TRL does, and the same reward (share of digit
characters). kuberl's padded passes run each distinct prompt once for its n samples
(`engine/shared_prefix.py`): the same log-probs and gradients, less work; TRL runs every row's
prompt. The update is exactly on-policy (one epoch, one mini-batch), so
neither computes a separate old-log-prob forward (TRL at one iteration; kuberl with
`actor.on_policy_shortcut`).
Activation checkpointing is off on both sides (TRL's GRPOConfig turns it on by default; runs
before 2026-11-26 14:10 had it on for TRL only, which cost TRL a second forward in the update).
Both honour OMP_NUM_THREADS (default 1: on a shared machine more threads are slower). Step time
is wall-clock per training step (generation included); tokens/s counts prompt + response tokens.
The first step of each is a warm-up and is left out. Timing never decides a test; this only
prints.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
TOKENIZER_DIR = REPO / "examples" / "tokenizer" / "arith-tokenizer"
TRAIN_FILE = REPO / "examples" / "data" / "arith" / "train.parquet"
LR, BETA = 1e-5, 0.001


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    prompts: int
    samples: int
    response_length: int


SHAPES = {
    "tiny": Shape(
        layers=2, hidden=64, heads=4, kv_heads=2, prompts=8, samples=4, response_length=32
    ),
    "compute": Shape(
        layers=4, hidden=256, heads=4, kv_heads=2, prompts=16, samples=4, response_length=128
    ),
}


def digit_share(text: str) -> float:
    return sum(ch.isdigit() for ch in text) / len(text) if text else 0.0


def run_kuberl(model_dir: Path, work: Path, steps: int, shape: Shape) -> list[tuple[float, float]]:
    """(step seconds, tokens) per step from kuberl's own metrics."""
    from kuberl_runtime.config import run_config_from_dict
    from kuberl_runtime.launcher.worker import run_worker

    work.mkdir(parents=True)
    reward_file = work / "digit_reward.py"
    reward_file.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return sum(c.isdigit() for c in solution_str) / len(solution_str) "
        "if solution_str else 0.0\n"
    )
    config = {
        "data": {
            "train_files": str(TRAIN_FILE),
            "train_batch_size": shape.prompts,
            "max_prompt_length": 96,
            "max_response_length": shape.response_length,
            "truncation": "left",
        },
        "actor_rollout_ref": {
            "model": {
                "path": str(model_dir),
                "use_remove_padding": False,
                "enable_gradient_checkpointing": False,
            },
            "actor": {
                "optim": {"lr": LR},
                "ppo_mini_batch_size": shape.prompts,
                "ppo_micro_batch_size_per_gpu": shape.prompts * shape.samples,
                "use_kl_loss": True,
                "kl_loss_coef": BETA,
                # One epoch over one mini-batch: exactly on-policy, so kuberl skips the
                # old-log-prob forward as TRL does at one iteration (off by default in kuberl).
                "on_policy_shortcut": True,
            },
            "ref": {"log_prob_micro_batch_size_per_gpu": shape.prompts * shape.samples},
            "rollout": {
                "name": "hf",
                "n": shape.samples,
                "log_prob_micro_batch_size_per_gpu": shape.prompts * shape.samples,
                "tensor_model_parallel_size": 1,
            },
        },
        "algorithm": {"adv_estimator": "grpo"},
        "custom_reward_function": {"path": str(reward_file)},
        "trainer": {
            "device": "cpu",
            "nnodes": 1,
            "n_gpus_per_node": 1,
            "total_training_steps": steps,
            "val_before_train": False,
            "resume_mode": "disable",
            "default_local_dir": str(work),
            "logger": ["console"],
        },
    }
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    run_worker(run_config_from_dict(config))
    records = [json.loads(line) for line in (work / "logs/metrics.jsonl").open()]
    return [(r["timing_s/step"], r["perf/total_num_tokens"]) for r in records]


def run_trl(model_dir: Path, work: Path, steps: int, shape: Shape) -> list[tuple[float, float]]:
    import datasets
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    rows = datasets.Dataset.from_parquet(str(TRAIN_FILE)).select_columns(["prompt"])

    def reward(completions, **_):
        return [digit_share(c[0]["content"] if isinstance(c, list) else c) for c in completions]

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.samples: list[tuple[float, float]] = []
            self.started = 0.0
            self.tokens_before = 0

        def on_step_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()
            self.tokens_before = state.num_input_tokens_seen

        def on_step_end(self, args, state, control, **kwargs):
            tokens = state.num_input_tokens_seen - self.tokens_before
            self.samples.append((time.perf_counter() - self.started, float(tokens)))

    args = GRPOConfig(
        output_dir=str(work),
        use_cpu=True,
        per_device_train_batch_size=shape.prompts * shape.samples,
        gradient_accumulation_steps=1,
        num_generations=shape.samples,
        max_completion_length=shape.response_length,
        temperature=1.0,
        learning_rate=LR,
        beta=BETA,
        max_steps=steps,
        logging_strategy="no",
        disable_tqdm=True,
        report_to=[],
        save_strategy="no",
        seed=0,
        dataloader_num_workers=0,
        bf16=False,
        # GRPOConfig turns activation checkpointing on by default (TrainingArguments does not);
        # kuberl's side runs without it (enable_gradient_checkpointing: false), so TRL does too.
        gradient_checkpointing=False,
    )
    clock = StepClock()
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[reward],
        args=args,
        train_dataset=rows,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        callbacks=[clock],
    )
    trainer.train()
    return clock.samples


def summarise(name: str, rounds: list[list[tuple[float, float]]]) -> tuple[float, float]:
    """Median step time and overall tokens/s, each round's first (warm-up) step left out."""
    measured = [sample for samples in rounds for sample in samples[1:]]
    step_s = statistics.median(s for s, _ in measured)
    tokens_per_s = sum(t for _, t in measured) / sum(s for s, _ in measured)
    tokens_per_step = statistics.mean(t for _, t in measured)
    print(
        f"{name:>8}: step time {step_s:.3f} s (median of {len(measured)} steps, "
        f"{len(rounds)} rounds), {tokens_per_s:,.0f} tokens/s ({tokens_per_step:,.0f} per step "
        "by its own count)"
    )
    return step_s, tokens_per_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=list(SHAPES))
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--rounds", type=int, default=2, help="alternate kuberl and TRL runs so drift hits both"
    )
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # both loops honour it

    import torch
    from transformers import AutoTokenizer

    from kuberl_runtime.testing.tiny import save_tiny_model

    print(f"load average at start: {os.getloadavg()}")
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    for name in args.shapes:
        shape = SHAPES[name]
        torch.set_num_threads(args.threads)
        with tempfile.TemporaryDirectory(prefix="kuberl-bench-") as tmp:
            work = Path(tmp)
            model_dir = save_tiny_model(
                work / "model",
                tokenizer,
                seed=0,
                num_layers=shape.layers,
                hidden=shape.hidden,
                num_heads=shape.heads,
                num_kv_heads=shape.kv_heads,
            )
            ours_runs, trl_runs = [], []
            for round_ in range(args.rounds):
                ours_runs.append(
                    run_kuberl(model_dir, work / f"kuberl-{round_}", args.steps, shape)
                )
                torch.set_num_threads(args.threads)
                trl_runs.append(run_trl(model_dir, work / f"trl-{round_}", args.steps, shape))
        print(
            f"shape {name}: {shape.layers} layers x hidden {shape.hidden}, "
            f"{shape.prompts}x{shape.samples} samples, {shape.response_length}-token responses"
        )
        ours = summarise("kuberl", ours_runs)
        theirs = summarise("trl", trl_runs)
        print(
            f"   ratio ({name}): kuberl/trl tokens/s = {ours[1] / theirs[1]:.2f}x, "
            f"step time trl/kuberl = {theirs[0] / ours[0]:.2f}x "
            f"(torch {torch.__version__}, {args.threads} threads)",
            flush=True,
        )
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
