"""Validate ROLL's own RLVR example configs as kuberl ROLL documents; count what each one gets.

    .venv/bin/python hack/roll_examples.py DIR [--only fsdp2] [--verbose]

DIR is ``examples/`` of an alibaba/ROLL checkout (e.g. ``git --git-dir=<ROLL>.git archive HEAD
examples | tar -x``). Every YAML whose path contains ``rlvr`` is loaded as kuberl would load it
and validated. Each file is *valid*, *refused* (errors, each naming the ROLL key and the reason)
or *unhandled* (an unknown key, or a value outside a key's schema: kuberl does not know what
ROLL means there). ``--verbose`` prints every file's errors.
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
from pathlib import Path

from kuberl_api.validation import load_documents, validate_document

log = logging.getLogger("roll_examples")
UNHANDLED = ("unknown key", "must be one of", "must be a mapping")


def verdict(path: Path, verbose: bool) -> str:
    outcome = "valid"
    for doc in load_documents(path):
        errors = validate_document(doc).errors
        if verbose:
            for problem in errors:
                log.info("  %s", problem.render()[:240])
        if any(any(text in p.message for text in UNHANDLED) for p in errors):
            return "unhandled"
        if errors:
            outcome = "refused"
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--only", default="", help="count only paths containing this too")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    files = sorted(
        p for p in args.dir.rglob("*.yaml") if "rlvr" in str(p).lower() and args.only in str(p)
    )
    counts: collections.Counter[str] = collections.Counter()
    for path in files:
        outcome = verdict(path, args.verbose)
        counts[outcome] += 1
        log.info("%-9s %s", outcome, path.relative_to(args.dir))
    log.info(
        "%d files: %d valid, %d refused with reasons, %d unhandled",
        len(files),
        counts["valid"],
        counts["refused"],
        counts["unhandled"],
    )
    return 1 if counts["unhandled"] else 0


if __name__ == "__main__":
    sys.exit(main())
