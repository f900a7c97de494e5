"""One-GPU GRPO step of kuberl next to TRL's GRPOTrainer: same model, batch and lengths.

    python bench/gpu_step.py [--steps 4] [--peer trl|none] [--out bench/results]
    python bench/gpu_step.py --dry-run        # tiny model, tiny batch, CPU: checks the plumbing

A Qwen2.5-0.5B-shaped model (random init from its config, no download), GRPO, 64 prompts × n=8,
prompt 512 / response 512 tokens with ignore_eos, on one GPU. The GPU machine has torch and
transformers but no vLLM or Ray, so kuberl runs with its Hugging Face rollout (the vLLM engine
is covered by contract tests only). Per step it reports verl's metrics: `perf/throughput`
(prompt + response tokens / step time / GPUs), `perf/mfu/actor` (update FLOPs / update time /
peak), the time split (generate, log-probs, update, weight sync) and peak GPU memory; for TRL
the same throughput definition over its step time. The first step is a warm-up and is left out
of the medians. Results go to `<out>/gpu_step-<device>-<time>.json` with the command line.
Timing never decides a test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
TOKENIZER_DIR = REPO / "examples" / "tokenizer" / "arith-tokenizer"

# Qwen/Qwen2.5-0.5B config.json (architecture only; weights are random).
QWEN25_05B = dict(
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    tie_word_embeddings=True,
)
# Dense bf16 peak FLOP/s by device name (H100/H200 SXM: 989 TFLOP/s).
PEAK_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--prompt-length", type=int, default=512)
    parser.add_argument("--response-length", type=int, default=512)
    parser.add_argument("--micro-batch", type=int, default=16, help="rows per forward/backward")
    parser.add_argument(
        "--no-remove-padding",
        dest="remove_padding",
        action="store_false",
        help="padded rows (SDPA) instead of packed ones (flash varlen, the GPU default)",
    )
    parser.add_argument("--peer", choices=("trl", "none"), default="trl")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--peer-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--dry-run", action="store_true", help="tiny model and batch on the CPU, 2 steps"
    )
    args = parser.parse_args(argv)
    if args.dry_run:
        args.steps, args.prompts, args.n = 2, 2, 2
        args.prompt_length, args.response_length, args.micro_batch = 16, 8, 4
    return args


def prepare(args: argparse.Namespace, work: Path) -> tuple[Path, Path, int]:
    """Random-init model dir, a parquet of prompts at least prompt_length tokens long."""
    import pandas as pd
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    shape = TINY | {"vocab_size": len(tokenizer)} if args.dry_run else QWEN25_05B
    config = Qwen2Config(
        **shape,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model_dir = work / "model"
    model.save_pretrained(model_dir, safe_serialization=True)
    tokenizer.save_pretrained(model_dir)
    num_params = sum(p.numel() for p in model.parameters())
    rows = []
    for i in range(args.prompts * 4):
        text = " ".join(f"{i + j}+{j}=" for j in range(args.prompt_length))  # > P tokens
        rows.append(
            {
                "data_source": "bench",
                "prompt": [{"role": "user", "content": text}],
                "reward_model": {"style": "rule", "ground_truth": "0"},
                "extra_info": {"index": i},
            }
        )
    data = work / "train.parquet"
    pd.DataFrame(rows).to_parquet(data)
    return model_dir, data, num_params


def digit_share(text: str) -> float:
    return sum(c.isdigit() for c in text) / len(text) if text else 0.0


def kuberl_config(args: argparse.Namespace, model_dir: Path, data: Path, work: Path) -> dict:
    reward = work / "reward.py"
    reward.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return sum(c.isdigit() for c in solution_str) / max(1, len(solution_str))\n"
    )
    rows = args.prompts * args.n
    return {
        "data": {
            "train_files": str(data),
            "train_batch_size": args.prompts,
            "max_prompt_length": args.prompt_length,
            "max_response_length": args.response_length,
            "truncation": "left",
        },
        "actor_rollout_ref": {
            "model": {
                "path": str(model_dir),
                "use_remove_padding": args.remove_padding and not args.dry_run,
                "enable_gradient_checkpointing": not args.dry_run,
            },
            "actor": {
                "optim": {"lr": 1e-6},
                "ppo_mini_batch_size": args.prompts,
                "ppo_micro_batch_size_per_gpu": args.micro_batch,
                "use_kl_loss": True,
                "kl_loss_coef": 0.001,
            },
            "ref": {"log_prob_micro_batch_size_per_gpu": args.micro_batch * 2},
            "rollout": {
                "name": "hf",
                "n": args.n,
                "ignore_eos": True,
                "log_prob_micro_batch_size_per_gpu": min(rows, args.micro_batch * 2),
                "tensor_model_parallel_size": 1,
            },
        },
        "algorithm": {"adv_estimator": "grpo"},
        "custom_reward_function": {"path": str(reward)},
        "trainer": {
            "device": "cpu" if args.dry_run else "cuda",
            "nnodes": 1,
            "n_gpus_per_node": 1,
            "total_training_steps": args.steps,
            "val_before_train": False,
            "resume_mode": "disable",
            "default_local_dir": str(work / "kuberl"),
            "logger": ["console"],
        },
    }


def run_kuberl(args: argparse.Namespace, model_dir: Path, data: Path, work: Path) -> list[dict]:
    from kuberl_runtime.config import run_config_from_dict
    from kuberl_runtime.launcher.worker import run_worker

    config = kuberl_config(args, model_dir, data, work)
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    run_worker(run_config_from_dict(config))
    lines = (work / "kuberl" / "logs" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def actor_mfu(record: dict, num_params: int, args: argparse.Namespace, peak: float | None) -> Any:
    """verl-style: training FLOPs (6N per token + causal attention) over update time and peak."""
    if not peak or not record.get("timing_s/update_actor"):
        return None
    shape = TINY if args.dry_run else QWEN25_05B
    seq = args.prompt_length + args.response_length
    rows = args.prompts * args.n
    attention = 6 * shape["num_hidden_layers"] * shape["hidden_size"] * seq * seq * rows
    flops = 6 * num_params * seq * rows + attention
    return flops / record["timing_s/update_actor"] / peak


def summarise_kuberl(records: list[dict], num_params: int, args, peak) -> dict:
    measured = records[1:] or records
    keys = {
        "perf/throughput": "perf/throughput",
        "timing_s/gen": "generate_s",
        "timing_s/old_log_prob": "old_log_prob_s",
        "timing_s/ref": "ref_log_prob_s",
        "timing_s/update_actor": "update_s",
        "timing_s/update_weights": "weight_sync_s",
        "timing_s/step": "step_s",
        "perf/max_memory_allocated_gb": "peak_memory_allocated_gb",
        "perf/max_memory_reserved_gb": "peak_memory_reserved_gb",
    }
    out = {
        name: statistics.median(r[key] for r in measured if key in r)
        for key, name in keys.items()
        if any(key in r for r in measured)
    }
    mfus = [m for m in (actor_mfu(r, num_params, args, peak) for r in measured) if m]
    out["perf/mfu/actor"] = statistics.median(mfus) if mfus else None
    out["per_step"] = records
    return out


def run_trl(args: argparse.Namespace, model_dir: Path, data: Path, work: Path) -> dict:
    import datasets
    import torch
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    rows = datasets.Dataset.from_parquet(str(data)).select_columns(["prompt"])
    on_gpu = not args.dry_run

    def reward(completions, **_):
        return [digit_share(c[0]["content"] if isinstance(c, list) else c) for c in completions]

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.steps: list[dict] = []
            self.started = 0.0

        def on_step_begin(self, args_, state, control, **kwargs):
            if on_gpu:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            self.started = time.perf_counter()

        def on_step_end(self, args_, state, control, **kwargs):
            if on_gpu:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - self.started
            batch_rows = args.prompts * args.n
            tokens = batch_rows * (args.prompt_length + args.response_length)
            self.steps.append(
                {
                    "step_s": seconds,
                    "perf/throughput": tokens / seconds,
                    "peak_memory_allocated_gb": (
                        torch.cuda.max_memory_allocated() / 2**30 if on_gpu else 0.0
                    ),
                }
            )

    rows_per_step = args.prompts * args.n
    config = GRPOConfig(
        output_dir=str(work / "trl"),
        use_cpu=not on_gpu,
        bf16=on_gpu,
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=max(1, rows_per_step // args.micro_batch),
        num_generations=args.n,
        max_completion_length=args.response_length,
        generation_kwargs={"min_new_tokens": args.response_length},  # TRL's ignore_eos
        gradient_checkpointing=on_gpu,
        temperature=1.0,
        learning_rate=1e-6,
        beta=0.001,
        max_steps=args.steps,
        logging_strategy="no",
        disable_tqdm=True,
        report_to=[],
        save_strategy="no",
        seed=0,
        dataloader_num_workers=0,
    )
    clock = StepClock()
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[reward],
        args=config,
        train_dataset=rows,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        callbacks=[clock],
    )
    trainer.train()
    measured = clock.steps[1:] or clock.steps
    summary = {k: statistics.median(s[k] for s in measured) for k in measured[0]}
    return summary | {"per_step": clock.steps}


def run_peer_in_child(work: Path) -> dict:
    """TRL in its own process: the GPU memory kuberl's run held is the driver's again."""
    import subprocess

    argv = [sys.executable, *sys.argv, "--peer-child", str(work)]
    child = subprocess.run(argv, capture_output=True, text=True, check=False)
    lines = child.stdout.strip().splitlines()
    if child.returncode or not lines:  # a peer's failure must not lose kuberl's numbers
        return {"error": f"exit {child.returncode}: {child.stderr[-2000:]}"}
    return json.loads(lines[-1])


def peer_child(args: argparse.Namespace) -> int:
    work = args.peer_child
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        os.environ.pop(key, None)  # else accelerate would wrap TRL's model in DDP
    try:
        summary = run_trl(args, work / "model", work / "train.parquet", work)
    except Exception as err:  # reported, not raised: kuberl's numbers are already kept
        summary = {"error": f"{type(err).__name__}: {err}"}
    print(json.dumps(summary, default=str))
    return 0


def device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def main(argv: list[str] | None = None) -> int:
    import tempfile

    args = parse_args(argv)
    if args.peer_child:
        return peer_child(args)
    if not args.dry_run:
        import torch

        if not torch.cuda.is_available():
            print("no GPU here: run with --dry-run, or on a GPU machine", file=sys.stderr)
            return 2
    name = device_name()
    peak = next((flops for key, flops in PEAK_FLOPS.items() if key in name), None)
    result: dict[str, Any] = {
        "command": " ".join([sys.executable, *sys.argv]),
        "device": name,
        "setup": {k: str(v) for k, v in vars(args).items()},
    }
    with tempfile.TemporaryDirectory(prefix="kuberl-gpu-bench-") as tmp:
        work = Path(tmp)
        model_dir, data, num_params = prepare(args, work)
        result["num_params"] = num_params
        if args.peer == "trl":  # first, in a child: each run has the whole GPU to itself
            result["trl"] = run_peer_in_child(work)
        result["kuberl"] = summarise_kuberl(
            run_kuberl(args, model_dir, data, work), num_params, args, peak
        )
    kuberl_tps = result["kuberl"].get("perf/throughput")
    trl_tps = result.get("trl", {}).get("perf/throughput")
    if kuberl_tps and trl_tps:
        result["kuberl_over_trl_throughput"] = kuberl_tps / trl_tps
    args.out.mkdir(parents=True, exist_ok=True)
    tag = "dry-run" if args.dry_run else name.replace(" ", "_")
    path = args.out / f"gpu_step-{tag}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    brief = {k: v for k, v in result["kuberl"].items() if k != "per_step"}
    print(json.dumps({"kuberl": brief, "trl": result.get("trl", {}).get("perf/throughput")}))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
