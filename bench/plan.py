"""The dry-run table: per-rank peak memory, FLOPs per trained token and sync bytes at real sizes.

    .venv/bin/python bench/plan.py [--models Qwen2.5-0.5B Qwen2.5-7B Qwen2.5-32B] [--worlds 8 16 32]
    .venv/bin/python bench/plan.py --models Qwen2.5-7B --worlds 8 --response 16384 \
        --rows 1 --log-prob-rows 1 --sp 1 4      # a long-response row: Ulysses SP 1 vs 4

Each cell runs the runtime's own build, FSDP2 sharding, one actor update, the old/ref log-prob
passes and the weight sync on fake tensors (`kuberl_runtime.dryrun`), in a fresh process (one
fake process group per process), at 3/4/5 decoder layers extrapolated exactly to the model's
depth (`dryrun/depth.py`; "figures" says which was done, `--full-depth` executes every layer;
"dry_run_s" is the dry run's wall time). Shape: GRPO-like, prompt 512 + response 1024 packed
(use_remove_padding, flash varlen attention as on a GPU), actor micro-batch 8 rows, log-prob
micro-batch 16 rows, gradient checkpointing, fp32 reference, H100. The FLOPs ratio divides the
update's counted FLOPs (recompute included, LM head on response positions only) by verl 0.9.1's
analytic count (`verl.utils.flops_counter`: 6N per token + 6 sum(s^2) d h L). `--sp`: Ulysses
sequence parallelism (each rank runs 1/sp of every sequence; the figures are per rank, FLOPs per
token per the rank's own tokens, the ratio against the analytic count of the rank's share).
`--prompt`, `--response`, `--rows`, `--log-prob-rows` change the shape. Only prints.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CELL = """
import json, sys, time
from transformers import AutoConfig
from verl.utils.flops_counter import ESTIMATE_FUNC
from kuberl_runtime.dryrun import DryRunInput, check_fit, model_config, plan_dry
name, world, prompt, response, rows, lp_rows, sp, full_depth = sys.argv[1], *map(int, sys.argv[2:])
cfg = model_config(name)
spec = DryRunInput(model_config=cfg, world_size=world, prompt_length=prompt,
                   response_length=response, micro_batch_rows=rows,
                   log_prob_micro_batch_rows=lp_rows, sp_size=sp)
t0 = time.perf_counter()
r = plan_dry(spec, full_depth=bool(full_depth))
seconds = time.perf_counter() - t0
seqlens = [spec.prompt_length + spec.response_length] * spec.micro_batch_rows
config = AutoConfig.for_model(**cfg)
analytic = ESTIMATE_FUNC[cfg["model_type"]](config, sum(seqlens), seqlens, 1.0) * 1e12 / sp
update = r.phase("update_actor")
shape = {} if (prompt, response, rows, lp_rows) == (512, 1024, 8, 16) else {
    "prompt": prompt, "response": response, "rows": rows, "log_prob_rows": lp_rows}
print(json.dumps({
    "model": name, "world": world, **shape, **({"sp": sp} if sp > 1 else {}),
    "params_B": round(r.parameters / 1e9, 2),
    "static_GiB": round(r.static_bytes / 2**30, 2),
    **{p.name + "_GiB": round(p.peak_bytes / 2**30, 2) for p in r.phases},
    "flops_per_token_G": round(update.flops / update.tokens / 1e9, 1),
    "flops_ratio": round(update.flops / analytic, 3),
    "sync_GiB": round(r.phase("weight_sync").collective_bytes / 2**30, 2),
    "update_collective_GiB": round(update.collective_bytes / 2**30, 2),
    "fits_H100": check_fit(r).fits,
    "figures": r.method,
    "dry_run_s": round(seconds, 1),
}))
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--models", nargs="+", default=["Qwen2.5-0.5B", "Qwen2.5-7B", "Qwen2.5-32B"]
    )
    parser.add_argument("--worlds", nargs="+", type=int, default=[8, 16, 32])
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--response", type=int, default=1024)
    parser.add_argument("--rows", type=int, default=8, help="actor micro-batch rows")
    parser.add_argument("--log-prob-rows", type=int, default=16)
    parser.add_argument("--sp", nargs="+", type=int, default=[1], help="Ulysses degrees")
    parser.add_argument(
        "--full-depth", action="store_true", help="execute every layer (no extrapolation)"
    )
    args = parser.parse_args()
    shape = [args.prompt, args.response, args.rows, args.log_prob_rows]
    cells = [(m, w, sp) for m in args.models for w in args.worlds for sp in args.sp]
    for model, world, sp in cells:
        cell = [world, *shape, sp, int(args.full_depth)]
        out = subprocess.run(
            [sys.executable, "-c", CELL, model, *map(str, cell)],
            capture_output=True,
            text=True,
            check=False,
        )
        lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
        if out.returncode or not lines:
            error = {"model": model, "world": world, "sp": sp, "error": out.stderr[-500:]}
            print(json.dumps(error))
        else:
            print(lines[-1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
