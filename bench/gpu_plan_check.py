"""The dry run against a real GPU: each phase predicted on fake tensors, then measured on CUDA.

    python bench/gpu_plan_check.py [--shapes Qwen2.5-0.5B Qwen2.5-1.5B] [--out DIR]

For each shape at world 1 (one GPU; a real NCCL group of one), packed rows of `--rows` x
(`--prompt` + `--response`) tokens, gradient checkpointing, fp32 actor and reference, bf16
compute — the `kuberl plan` defaults:

- the dry run (`dryrun.run.run_dry`, in a child process: it needs one without a process group)
  predicts each phase's peak bytes and FLOPs;
- the runtime's own code runs the same phases with real tensors on the GPU (`build_sharded`,
  `Actor.backward_micro` + clip + AdamW step, `compute_log_prob` with entropy,
  `compute_ref_log_prob`, the weight-sync stream), measured with the caching allocator's peak
  and CUDA events (one warm-up, median of `--repeats`).

It prints, per phase, real peak / predicted peak, and achieved TFLOP/s from the dry run's FLOP
count beside a bf16 matrix product measured in the same run (the card's own ceiling).
Attention: torch's flash varlen kernel (`engine/varlen.py`) — no flash-attn on that machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GiB = 1 << 30


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["Qwen2.5-0.5B", "Qwen2.5-1.5B"])
    parser.add_argument("--rows", type=int, default=8, help="rows per micro-batch")
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--response", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--predict-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--cpu", action="store_true", help="run the real phases on the CPU (checks the plumbing)"
    )
    return parser.parse_args(argv)


def dry_input(shape: str, args: argparse.Namespace) -> Any:
    from kuberl_runtime.dryrun.run import DryRunInput
    from kuberl_runtime.dryrun.shapes import model_config

    return DryRunInput(
        model_config=model_config(shape),
        world_size=1,
        prompt_length=args.prompt,
        response_length=args.response,
        micro_batch_rows=args.rows,
        log_prob_micro_batch_rows=args.rows,
    )


def predict(shape: str, args: argparse.Namespace) -> dict[str, Any]:
    """The dry run's phases (in this process: call it from a child)."""
    from kuberl_runtime.dryrun.run import run_dry

    report = run_dry(dry_input(shape, args))
    return {
        "parameters": report.parameters,
        "phases": {p.name: dataclasses.asdict(p) for p in report.phases},
    }


def predict_in_child(shape: str, args: argparse.Namespace) -> subprocess.Popen:
    argv = [sys.executable, __file__, "--predict-only", "--shapes", shape]
    argv += ["--rows", str(args.rows), "--prompt", str(args.prompt)]
    argv += ["--response", str(args.response)]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)


def matmul_tflops() -> float:
    """bf16 8192^3 products on random data: median of 10 after 3 warm-ups."""
    import torch

    a, b = (torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    times = []
    for i in range(13):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end) / 1e3)
    return 2 * 8192**3 / statistics.median(times) / 1e12


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(shape: str, args: argparse.Namespace) -> dict[str, Any]:
    """The same phases as the dry run, real tensors on cuda:0."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from transformers import AutoModelForCausalLM

    from kuberl_api.plan.standalone import fsdp_plan
    from kuberl_runtime.device import Device
    from kuberl_runtime.dryrun import run as dry
    from kuberl_runtime.engine.actor import Actor
    from kuberl_runtime.engine.fsdp import torch_dtype
    from kuberl_runtime.engine.init import build_sharded
    from kuberl_runtime.engine.micro import MicroBatching
    from kuberl_runtime.engine.model_builder import build_causal_lm_empty, load_config
    from kuberl_runtime.engine.optim import clip_and_step_unchecked, grad_norm
    from kuberl_runtime.engine.ulysses import NO_SP

    spec = dry_input(shape, args)
    on_gpu = not args.cpu
    gpu = Device("cuda" if on_gpu else "cpu")
    cuda = gpu.torch_device(0)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    dist.init_process_group(gpu.backend, rank=0, world_size=1, device_id=cuda if on_gpu else None)
    mesh = init_device_mesh(cuda.type, (1,))
    fsdp = fsdp_plan({"dtype": spec.param_dtype})
    out: dict[str, Any] = {}
    synchronize = torch.cuda.synchronize if on_gpu else (lambda: None)

    def peak_bytes() -> int:
        return torch.cuda.max_memory_allocated() if on_gpu else 0

    def phase(name: str, fn, repeats: int = args.repeats) -> None:
        fn()  # warm-up: optimizer state, allocator pools, kernels chosen
        times = []
        synchronize()
        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
        for _ in range(repeats):
            synchronize()
            start = time.perf_counter()
            fn()
            synchronize()
            times.append(time.perf_counter() - start)
        out[name] = {"peak_bytes": peak_bytes(), "seconds": statistics.median(times)}

    with tempfile.TemporaryDirectory() as tmp:
        base = dry._model_spec(spec, Path(tmp))
        model_spec = dataclasses.replace(base, override_config={}, native_varlen=on_gpu)

        def host_model(dtype: torch.dtype) -> torch.nn.Module:
            torch.manual_seed(0)
            config = load_config(model_spec)
            return AutoModelForCausalLM.from_config(config, dtype=dtype)

        def sharded(ms, dtype_name: str) -> torch.nn.Module:
            dtype = torch_dtype(dtype_name)
            return build_sharded(
                partial(build_causal_lm_empty, ms, dtype),
                partial(host_model, dtype),
                fsdp,
                gpu,
                cuda,
                is_main=True,
                mesh=mesh,
            )

        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
        model = sharded(model_spec, spec.actor_dtype)
        out["init"] = {"peak_bytes": peak_bytes(), "seconds": 0.0}
        out["attn_implementation"] = model.config._attn_implementation
        ref_spec = dataclasses.replace(model_spec, enable_gradient_checkpointing=False)
        ref = sharded(ref_spec, spec.ref_dtype).requires_grad_(False)
        actor = Actor(model, dry._actor_config(spec), dry._settings(spec, NO_SP), ref_model=ref)
        vocab = int(spec.model_config["vocab_size"])

        def batch(rows: int, with_targets: bool = False):
            b = dry._batch(spec, rows, with_targets=with_targets)
            g = torch.Generator().manual_seed(rows)
            b["input_ids"] = torch.randint(0, vocab, b["input_ids"].shape, generator=g)
            b["responses"] = b["input_ids"][:, spec.prompt_length :].contiguous()
            if with_targets:
                b["advantages"] = torch.randn(b["advantages"].shape, generator=g)
            return b.to(cuda)

        update_batch = batch(spec.micro_batch_rows, with_targets=True)

        def update() -> None:
            model.train()
            actor.backward_micro(update_batch, dry._global_batch(spec))
            clip_and_step_unchecked(model, actor.optimizer, 1.0, grad_norm(model))

        phase("update_actor", update)
        log_prob_batch = batch(spec.log_prob_micro_batch_rows)
        phase(
            "old_log_prob",
            lambda: actor.compute_log_prob(log_prob_batch, MicroBatching(), calculate_entropy=True),
        )
        phase("ref_log_prob", lambda: actor.compute_ref_log_prob(log_prob_batch, MicroBatching()))
        phase("weight_sync", lambda: dry._sync(model, spec, cuda), repeats=1)
    dist.destroy_process_group()
    return out


def compare(shape: str, predicted: dict, real: dict, ceiling: float) -> list[dict[str, Any]]:
    rows = []
    for name, want in predicted["phases"].items():
        got = real.get(name)
        if got is None:
            continue
        seconds = got["seconds"]
        tflops = want["flops"] / seconds / 1e12 if seconds and want["flops"] else None
        real_over_predicted = got["peak_bytes"] / want["peak_bytes"] if want["peak_bytes"] else None
        rows.append(
            {
                "shape": shape,
                "phase": name,
                "predicted_gib": want["peak_bytes"] / GiB,
                "real_gib": got["peak_bytes"] / GiB,
                "real_over_predicted": real_over_predicted,
                "seconds": seconds,
                "tflops": tflops,
                "share_of_matmul": tflops / ceiling if tflops and ceiling else None,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.predict_only:
        print(json.dumps(predict(args.shapes[0], args)))
        return 0
    import torch

    if not (torch.cuda.is_available() or args.cpu):
        print("no GPU here: the dry run alone is `kuberl plan`", file=sys.stderr)
        return 2
    children = {shape: predict_in_child(shape, args) for shape in args.shapes}
    ceiling = 0.0 if args.cpu else matmul_tflops()
    result: dict[str, Any] = {
        "command": " ".join([sys.executable, *sys.argv]),
        "device": "cpu" if args.cpu else torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "matmul_bf16_tflops": ceiling,
        "rows": [],
    }
    for shape in args.shapes:
        real = measure(shape, args)
        stdout, _ = children[shape].communicate(timeout=900)
        predicted = json.loads(stdout.strip().splitlines()[-1])
        result[shape] = {"real": real, "predicted": predicted}
        result["rows"] += compare(shape, predicted, real, ceiling)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"gpu_plan_check-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2, default=str))
    print(f"device {result['device']}, torch {result['torch']}, bf16 matmul {ceiling:.0f} TFLOP/s")
    print(
        f"{'shape':14} {'phase':13} {'pred GiB':>9} {'real GiB':>9} {'real/pred':>9} "
        f"{'s':>7} {'TFLOP/s':>8} {'/matmul':>7}"
    )
    for r in result["rows"]:
        tf = f"{r['tflops']:8.1f}" if r["tflops"] else " " * 8
        share = f"{r['share_of_matmul']:7.2f}" if r["share_of_matmul"] else " " * 7
        ratio = f"{r['real_over_predicted']:9.2f}" if r["real_over_predicted"] else " " * 9
        print(
            f"{r['shape']:14} {r['phase']:13} {r['predicted_gib']:9.2f} {r['real_gib']:9.2f} "
            f"{ratio} {r['seconds']:7.3f} {tf} {share}"
        )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
