"""``kuberl crd``: print the generated CustomResourceDefinition."""

import argparse
import sys

from kuberl_api.crd import render_crd


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", help="write to this file instead of stdout")


def run(args: argparse.Namespace) -> int:
    text = render_crd()
    if args.output:
        with open(args.output, "w") as out:
            out.write(text)
    else:
        sys.stdout.write(text)
    return 0
