"""``kuberl operator``: run the control plane (a kopf operator) against the current cluster."""

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from kuberl_operator.config import add_arguments as add_operator_arguments

    add_operator_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from kuberl_operator.config import from_args
    from kuberl_operator.main import run_operator

    run_operator(from_args(args))
    return 0
