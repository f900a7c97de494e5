"""``kuberl train CONFIG [dotted.key=value ...]``: run a training job on this machine.

CONFIG is a bare verl backend_config, a ModelArts YAML or an RLTrainingJob manifest. Overrides
use verl's dotted paths (``trainer.total_training_steps=5``; a leading ``+`` is accepted).
"""

import argparse
import sys

from kuberl_api.validation import SpecInvalid


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "config", metavar="CONFIG", help="job manifest, ModelArts or verl config; - reads stdin"
    )
    parser.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="backend_config overrides"
    )
    parser.add_argument(
        "--launcher",
        choices=("auto", "local", "ray"),
        default=None,
        help="how ranks start: local processes, or Ray actors across the cluster at "
        "RAY_ADDRESS; auto (default, or $KUBERL_LAUNCHER) picks ray when RAY_ADDRESS is set",
    )


def run(args: argparse.Namespace) -> int:
    from kuberl_runtime.config import load_run_config
    from kuberl_runtime.dryrun.from_plan import JobDoesNotFit
    from kuberl_runtime.launcher.local import LaunchError
    from kuberl_runtime.launcher.select import launch
    from kuberl_runtime.reporting.driver_log import persist_driver_log

    try:
        run_config = load_run_config(args.config, args.overrides)
        # Under the operator: the attempt's whole log, kept on the job's own volume.
        persist_driver_log(run_config.output_dir)
        return launch(run_config, args.launcher)
    except FileNotFoundError as err:
        print(f"{args.config}: {err}", file=sys.stderr)
        return 2
    except SpecInvalid as err:
        for problem in err.problems:
            print(f"{args.config}: error: {problem.render()}", file=sys.stderr)
        return 2
    except (LaunchError, JobDoesNotFit) as err:  # JobDoesNotFit: a one-rank run, in-process
        print(f"error: {err}", file=sys.stderr)
        return 2
