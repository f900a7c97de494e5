"""``kuberl keys [--json] [PREFIX]``: every config key, verl's default, its fate and where."""

import argparse
import json
from typing import Any

from kuberl_api.keys import Fate, KeyEntry, entries, schema_leaves


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "prefix",
        nargs="?",
        default="",
        metavar="PREFIX",
        help="only keys starting with this, e.g. actor_rollout_ref.rollout",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per key, as a list")
    parser.add_argument("--fate", choices=[f.value for f in Fate], help="only keys with this fate")


def run(args: argparse.Namespace) -> int:
    defaults = schema_leaves()
    rows = [
        _row(e, defaults.get(e.key))
        for e in entries(args.prefix)
        if args.fate is None or e.fate.value == args.fate
    ]
    if not rows:
        print(f"no key starts with {args.prefix!r}")
        return 1
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            default = json.dumps(row["default"])
            print(f"{row['key']}  default={default}  {row['fate']}  {row['detail']}")
    return 0


def _row(entry: KeyEntry, default: Any) -> dict[str, Any]:
    detail = {
        Fate.HONOURED: f"read by {entry.where}",
        Fate.REFUSED: f"any other value is refused: {entry.fix}",
        Fate.NO_EFFECT: f"accepted, no effect in kuberl: {entry.reason}",
    }[entry.fate]
    if entry.fate is Fate.HONOURED and entry.accepts:
        detail += f" (only {', '.join(map(str, entry.accepts))})"
    return {
        "key": entry.key,
        "default": default,
        "fate": entry.fate.value,
        "where": entry.where,
        "detail": detail,
    }
