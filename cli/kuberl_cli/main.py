"""``kuberl <command>``: each command lives in its own module and is imported only when used."""

import argparse
import importlib
import logging
import sys

# command name -> (module, one-line help). Each module defines add_arguments(parser) and run(args).
COMMANDS = {
    "validate": ("kuberl_cli.validate", "check job manifests or configs; print every problem"),
    "keys": ("kuberl_cli.keys", "list every config key: verl default, fate, where it is read"),
    "crd": ("kuberl_cli.crd", "print the RLTrainingJob CustomResourceDefinition"),
    "plan": ("kuberl_cli.plan", "per-rank accelerator memory of a job, from a dry run; fit or fix"),
    "train": ("kuberl_cli.train", "run a training job on this machine (one rank per accelerator)"),
    "export": ("kuberl_cli.export", "write a merged Hugging Face model from a checkpoint"),
    "plot": ("kuberl_cli.plot", "redraw a run's learning curves (logs/curves.png)"),
    "operator": ("kuberl_cli.operator", "run the RLTrainingJob operator (kopf) on the cluster"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kuberl", description="Managed RL fine-tuning of language models on Kubernetes."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(module_name)
        module.add_arguments(sub)
        sub.set_defaults(handler=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
