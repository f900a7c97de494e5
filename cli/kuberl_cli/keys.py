"""``kuberl keys [--sft] [--json] [PREFIX]``: every config key, verl's default, its fate and where.

Without ``--sft`` the PPO/GRPO tree (``backend_config``); with it verl's SFT trainer config
(``spec.sft_config``, a bare SFT file, or an SFT-shaped ModelArts ``backend_config``)."""

import argparse
import json
from typing import Any

from kuberl_api.keys import Fate, KeyEntry, entries, schema_leaves
from kuberl_api.keys.sft import SFT_REGISTRY, sft_schema_leaves


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "prefix",
        nargs="?",
        default="",
        metavar="PREFIX",
        help="only keys starting with this, e.g. actor_rollout_ref.rollout",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per key, as a list")
    parser.add_argument(
        "--sft", action="store_true", help="the keys of verl's SFT config (spec.sft_config)"
    )
    parser.add_argument("--fate", choices=[f.value for f in Fate], help="only keys with this fate")


def run(args: argparse.Namespace) -> int:
    defaults, registered = _registry(args.sft, args.prefix)
    rows = [
        _row(e, defaults.get(e.key))
        for e in registered
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


def _registry(sft: bool, prefix: str) -> tuple[dict[str, Any], list[KeyEntry]]:
    """Schema defaults and the registered keys under ``prefix``, in tree order."""
    if not sft:
        return schema_leaves(), entries(prefix)
    defaults = sft_schema_leaves()
    keys = [k for k in defaults if k in SFT_REGISTRY and k.startswith(prefix)]
    return defaults, [SFT_REGISTRY[k] for k in keys]


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
