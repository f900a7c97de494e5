"""``kuberl validate FILE...``: every problem of every document, exit 1 when any is an error."""

import argparse
import sys

from kuberl_api.validation import SpecInvalid, load_documents, validate_document
from kuberl_api.validation.report import not_honoured_summary, problem_line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="RLTrainingJob manifest, ModelArts config, verl backend_config or ROLL config",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print problems only")


def run(args: argparse.Namespace) -> int:
    failed = False
    for path in args.files:
        try:
            documents = load_documents(path)
        except FileNotFoundError:
            print(f"{path}: no such file", file=sys.stderr)
            failed = True
            continue
        except SpecInvalid as err:
            _print_problems(path, err.problems)
            failed = True
            continue
        for doc in documents:
            result = validate_document(doc)
            failed |= not result.ok
            _print_result(doc.source, doc.kind, result, quiet=args.quiet)
    return 1 if failed else 0


def _print_result(source, kind, result, quiet: bool) -> None:
    for problem in result.problems:
        print(f"{source}: {problem_line(problem)}", file=sys.stderr)
    if result.ok and not quiet:
        print(f"{source}: ok ({kind}) — {_headline(result)}")
    elif not result.ok:
        print(f"{source}: {len(result.errors)} error(s)", file=sys.stderr)
    summary = not_honoured_summary(result.not_honoured, result.at_verl_default)
    if summary and not quiet:
        print(f"{source}: {summary}")


def _headline(result) -> str:
    if result.sft_config is not None:  # an SFT job (verl's SFT trainer config)
        sft = result.sft_config
        nodes = f"{sft.trainer.nnodes or 1}x{sft.trainer.n_gpus_per_node or 'auto'}"
        return f"sft, {nodes}, train_batch_size {sft.data.train_batch_size}"
    cfg = result.backend_config
    trainer = cfg.trainer
    return (
        f"{cfg.algorithm.adv_estimator}, "
        f"{trainer.nnodes}x{trainer.n_gpus_per_node} {trainer.device or 'auto'}, "
        f"train_batch_size {cfg.data.train_batch_size} x n {cfg.actor_rollout_ref.rollout.n}"
    )


def _print_problems(path, problems) -> None:
    for problem in problems:
        print(f"{path}: {problem_line(problem)}", file=sys.stderr)
