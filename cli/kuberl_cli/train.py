"""``kuberl train CONFIG [dotted.key=value ...]`` or ``kuberl train --plan PLAN``: run a training
job on this machine.

CONFIG is a bare verl backend_config, a ModelArts YAML or an RLTrainingJob manifest, resolved
here by the operator's own resolver (``kuberl_api.plan.from_document``). Overrides use verl's
dotted paths (``trainer.total_training_steps=5``; a leading ``+`` is accepted). PLAN is a
resolved plan as the operator submits it (``<af_output_dir>/.kuberl/<submission>.plan.json``):
loaded as is, never validated or resolved again; a plan of another kuberl release is refused.
"""

import argparse
import sys
from typing import TYPE_CHECKING

from kuberl_api.plan.version import PlanFileError
from kuberl_api.validation import SpecInvalid

if TYPE_CHECKING:
    from kuberl_runtime.config import RunConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "config",
        nargs="?",
        metavar="CONFIG",
        help="job manifest, ModelArts or verl config; - reads stdin",
    )
    parser.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="backend_config overrides"
    )
    parser.add_argument(
        "--plan",
        metavar="PLAN",
        help="a resolved plan (JSON, as the operator submits it) instead of CONFIG; - reads stdin",
    )
    parser.add_argument(
        "--launcher",
        choices=("auto", "local", "ray"),
        default=None,
        help="how ranks start: local processes, or Ray actors across the cluster at "
        "RAY_ADDRESS; auto (default, or $KUBERL_LAUNCHER) picks ray when RAY_ADDRESS is set",
    )


def run(args: argparse.Namespace) -> int:
    from kuberl_runtime.dryrun.from_plan import JobDoesNotFit
    from kuberl_runtime.launcher.local import LaunchError
    from kuberl_runtime.launcher.select import launch
    from kuberl_runtime.reporting.driver_log import persist_driver_log

    if (args.plan is None) == (args.config is None) or (args.plan and args.overrides):
        print(
            "error: give a CONFIG (with optional KEY=VALUE overrides) or --plan PLAN alone; "
            "a plan is run as resolved, so change its job and resolve it again instead",
            file=sys.stderr,
        )
        return 2
    source = args.plan or args.config
    try:
        run_config = _load(args)
        # Under the operator: the attempt's whole log, kept on the job's own volume.
        persist_driver_log(run_config.output_dir)
        return launch(run_config, args.launcher)
    except (FileNotFoundError, PlanFileError) as err:
        print(f"{source}: error: {err}", file=sys.stderr)
        return 2
    except SpecInvalid as err:
        for problem in err.problems:
            print(f"{source}: error: {problem.render()}", file=sys.stderr)
        return 2
    except (LaunchError, JobDoesNotFit) as err:  # JobDoesNotFit: a one-rank run, in-process
        print(f"error: {err}", file=sys.stderr)
        return 2


def _load(args: argparse.Namespace) -> "RunConfig":
    from kuberl_runtime.config import load_plan_file, load_run_config

    if args.plan is not None:
        return load_plan_file(args.plan)
    return load_run_config(args.config, args.overrides)
