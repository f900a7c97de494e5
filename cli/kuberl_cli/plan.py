"""``kuberl plan JOB.yaml``: per-rank, per-phase accelerator memory of a job, from a dry run.

The runtime's own model build, FSDP2 sharding and passes run on fake tensors over a fake process
group of the job's world size (`kuberl_runtime.dryrun`); no weights, no accelerator. The model's
dimensions come from `config.json` at the job's model path when readable here, else from
`--model-config` (a config.json, a model directory, or a known shape such as Qwen2.5-7B).
The accelerator is `--accelerator`, else the one the job's device plans against
(`kuberl_api.accelerators`: 910B for `npu`, H100 otherwise).
The passes run at 3, 4 and 5 decoder layers and are extrapolated to the model's depth where
every layer is alike and the 5-layer figures are exactly on the line (`dryrun/depth.py`); the
report says which it did. `--full-depth` executes every layer (minutes for 32B).
Exit status 1 when the job does not fit, with what to change; 2 when the job is invalid.
"""

import argparse
import sys

from kuberl_api.accelerators import KINDS, MEMORY_GIB, PLAN_FALLBACK_MODEL, plan_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # No runtime import here: every command's arguments are built when `kuberl` starts, and the
    # operator image (`kuberl operator`) has no data plane.
    parser.add_argument("job", metavar="JOB", help="RLTrainingJob manifest or verl config YAML")
    parser.add_argument(
        "--model-config",
        help="config.json, model directory, or a known shape (e.g. Qwen2.5-7B, Qwen2.5-32B)",
    )
    parser.add_argument(
        "--accelerator",
        help=f"{', '.join(MEMORY_GIB)} (default: {_defaults()})",
    )
    parser.add_argument(
        "--full-depth",
        action="store_true",
        help="execute every decoder layer instead of extrapolating from 3/4/5 layers",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key"
    )


def _defaults() -> str:
    """ "910B for a trainer.device npu job, else H100": the table's plan models."""
    named = [
        f"{k.plan_model} for a trainer.device {device} job"
        for device, k in KINDS.items()
        if k.plan_model not in (None, PLAN_FALLBACK_MODEL)
    ]
    return ", ".join([*named, f"else {PLAN_FALLBACK_MODEL}"])


def run(args: argparse.Namespace) -> int:
    from kuberl_api.validation import SpecInvalid
    from kuberl_runtime.config import load_run_config
    from kuberl_runtime.dryrun import check_fit, format_report, model_config, plan_dry
    from kuberl_runtime.dryrun.from_plan import dry_run_input
    from kuberl_runtime.dryrun.multi_turn import format_budget, turn_budget

    if args.accelerator is not None and args.accelerator not in MEMORY_GIB:
        known = ", ".join(sorted(MEMORY_GIB))
        print(f"--accelerator {args.accelerator}: unknown; use one of {known}", file=sys.stderr)
        return 2
    try:
        plan = load_run_config(args.job, args.set).plan
    except SpecInvalid as err:
        for problem in err.problems:
            print(f"{args.job}: error: {problem.render()}", file=sys.stderr)
        return 2
    accelerator = args.accelerator or plan_model(plan.placement.device)
    try:
        config = model_config(args.model_config or plan.model.path)
    except FileNotFoundError as err:
        print(f"{args.job}: {err}", file=sys.stderr)
        return 2
    report = plan_dry(dry_run_input(plan, config, accelerator), full_depth=args.full_depth)
    print(format_report(report))
    budget = turn_budget(plan)
    if budget is not None:
        print(format_budget(budget))
    return 0 if check_fit(report).fits and _reward_model_fits(plan, report) else 1


def _reward_model_fits(plan: object, report: object) -> bool:
    """The reward model's line, and whether it fits beside the trainer (dryrun/reward_model)."""
    from kuberl_runtime.dryrun import check_fit
    from kuberl_runtime.dryrun.reward_model import GiB, format_share, problems, share_of

    verdict = check_fit(report)  # type: ignore[arg-type]
    try:
        share = share_of(plan, verdict.capacity_gib)  # type: ignore[arg-type]
    except FileNotFoundError as err:
        print(f"reward model not counted: {err}")
        return True
    if share is None:
        return True
    print(format_share(share))
    found = problems(share, verdict, report.static_bytes / GiB)  # type: ignore[attr-defined]
    for problem in found:
        print(f"does not fit with the reward model: {problem}")
    return not found
