"""``kuberl validate FILE...``: every problem of every document, exit 1 when any is an error."""

import argparse
import sys

from kuberl_api.validation import SpecInvalid, load_documents, validate_document


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
        label = "error" if problem.is_error else "warning"
        print(f"{source}: {label}: {problem.render()}", file=sys.stderr)
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


def not_honoured_summary(changed: list[str], at_verl_default: list[str]) -> str:
    """One line: the no-effect keys set to something other than verl's default, by name, and
    how many more were set to verl's own default or to what kuberl does anyway (a copied verl
    config sets ~100: no news)."""
    if not changed and not at_verl_default:
        return ""
    text = (
        f"{len(changed)} key(s) set but not honoured "
        "(accepted, no effect in kuberl; see `kuberl keys`)"
    )
    if changed:
        text += ": " + ", ".join(changed)
    if at_verl_default:
        text += f"; {len(at_verl_default)} more set to verl's default (nothing lost), not listed"
    return text


def _print_problems(path, problems) -> None:
    for problem in problems:
        print(f"{path}: error: {problem.render()}", file=sys.stderr)
