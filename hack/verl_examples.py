"""Validate verl's own example scripts as kuberl backend_configs; print what each one hits.

    .venv/bin/python hack/verl_examples.py DIR [--base verl_generated.yaml] [--top 25]

DIR holds verl example scripts (``examples/`` of a verl checkout, e.g. tag v0.9.0, or any
directory below it): shell scripts that end in ``python3 -m verl.trainer.main_ppo key=value ...``
with Hydra overrides built from shell variables and arrays. Each script is run by bash with a
``python3`` stub first on a minimal PATH: the stub records the arguments of the
``-m verl.trainer.main_ppo*`` call and starts nothing (other ``python3`` calls, such as the
``import torch_npu`` probe, fail as on a GPU machine without NPU packages); HOME and the working
directory are a fresh temporary directory. The overrides are applied to verl's generated default
config (``_generated_ppo_trainer.yaml`` of the installed verl, as Hydra would) and the tree is
validated like a bare backend_config; a script that validates then meets the runtime's start
checks from the config alone (the plan and its JSON round trip as the operator ships it,
``check_runtime``, the actor's model spec, the reward manager), as
``tests/runtime/test_accepted_configs_start.py`` does; this environment's missing vLLM is an
image fact, not the script's, and is left out. Scripts for other engines (``model_engine=megatron``,
``veomni``, a Megatron ``--config-name``, ``actor.strategy=megatron``) are listed as skipped.
"""

from __future__ import annotations

import argparse
import collections
import copy
import importlib.util
import logging
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kuberl_api.plan import RunPlan
from kuberl_api.plan.from_document import load_plan_json, plan_document
from kuberl_api.validation import Document, parse_document, validate_document
from kuberl_api.validation.documents import set_dotted
from kuberl_api.validation.problems import Problem, SpecInvalid
from kuberl_api.yamlio import load_yaml
from kuberl_runtime.config import RunConfig, check_runtime
from kuberl_runtime.rewards.manager import reward_manager_for
from kuberl_runtime.trainer.components import actor_model_spec

log = logging.getLogger("verl_examples")

TRAINER_MODULE = "verl.trainer.main_ppo"
FSDP_STRATEGIES = ("fsdp", "fsdp2")
# Commands the scripts call besides python3; everything else is absent from their PATH.
TOOLS = ("date", "mkdir", "dirname", "basename", "tee", "cat", "nproc", "expr", "seq", "env")
SCRIPT_TIMEOUT_S = 30
_STUB = """#!/bin/sh
if [ "$1" = "-m" ]; then
  case "$2" in
    {module}*) printf '%s\\0' "$@" > "$KUBERL_CAPTURE"; exit 0 ;;
  esac
fi
exit 1
"""
# Sourced by bash before the script (BASH_ENV): raising limits needs privileges the scripts'
# machines have; here it would stop the script before the trainer call.
_BASH_ENV = "ulimit() { :; }\n"
# Values some scripts require from the user (``${VAR:?...}`` or ``set -u``).
USER_ENV = {"INFER_BACKEND": "vllm", "LORA_ADAPTER_PATH": "/adapters/lora"}
OTHER_ENGINES = ("megatron", "veomni")


@dataclass
class ScriptResult:
    script: str
    status: str
    """``pass``, ``refused``, ``start-refused`` (valid, refused by a start check), ``skipped``
    or ``failed`` (the script did not reach the trainer)."""
    detail: str = ""
    problems: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    """Dotted keys of the errors, for the tally."""


def verl_generated_config() -> Path:
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("verl is not installed: pass --base PATH_TO/_generated_ppo_trainer.yaml")
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "trainer" / "config" / "_generated_ppo_trainer.yaml"


def capture_arguments(script: Path) -> list[str] | None:
    """The arguments after ``python3 -m verl.trainer.main_ppo*`` in ``script``; None when the
    script ends without that call. Raises ``RuntimeError`` with bash's stderr when it fails."""
    with tempfile.TemporaryDirectory(prefix="verl-example-") as tmp:
        home = Path(tmp)
        bin_dir = home / "bin"
        bin_dir.mkdir()
        for name in ("python3", "python"):
            stub = bin_dir / name
            stub.write_text(_STUB.format(module=TRAINER_MODULE))
            stub.chmod(0o755)
        for tool in TOOLS:
            found = shutil.which(tool)
            if found:
                (bin_dir / tool).symlink_to(found)
        capture = home / "argv"
        bash_env = home / "bash_env"
        bash_env.write_text(_BASH_ENV)
        env = {
            **USER_ENV,
            "HOME": str(home),
            "PATH": str(bin_dir),
            "KUBERL_CAPTURE": str(capture),
            "BASH_ENV": str(bash_env),
        }
        bash = shutil.which("bash") or "/bin/bash"
        proc = subprocess.run(
            [bash, str(script.resolve())],
            cwd=home,
            env=env,
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT_S,
            check=False,
        )
        if not capture.exists():
            if proc.returncode != 0:
                tail = " | ".join(proc.stderr.strip().splitlines()[-2:])
                raise RuntimeError(f"bash exited {proc.returncode}: {tail}")
            return None
        argv = capture.read_text().split("\0")[:-1]
    return argv[2:]


def non_fsdp_reason(arguments: list[str]) -> str:
    """Why these arguments run another engine than FSDP; "" for an FSDP trainer."""
    for arg in arguments:
        key, _, value = arg.lstrip("+").partition("=")
        if arg.startswith("--config-name") and "megatron" in arg:
            return f"Megatron config ({arg})"
        if key == "model_engine" and value not in FSDP_STRATEGIES:
            return f"model_engine={value}"
        if key.endswith("actor.strategy") and value not in FSDP_STRATEGIES:
            return f"{key}={value}"
    return ""


def apply_overrides(base: dict[str, Any], arguments: list[str]) -> dict[str, Any]:
    """``base`` with Hydra's ``key=value``, ``+key=value``, ``++key=value`` and ``~key`` applied
    (values read as YAML, as ``kuberl train FILE key=value`` reads them). Hydra's own options
    (``--config-name``, ...) and group choices (``model_engine=fsdp``) leave the tree alone."""
    tree = copy.deepcopy(base)
    for arg in arguments:
        if arg.startswith("-"):
            continue
        if arg.startswith("~"):
            _delete(tree, arg[1:].partition("=")[0])
            continue
        key, sep, value = arg.lstrip("+").partition("=")
        if (
            not sep
            or "@" in key
            or key.startswith("hydra.")
            or ("." not in key and key not in tree)
        ):
            continue  # Hydra's own settings and config-group choices
        set_dotted(tree, key, load_yaml(value) if value else None)
    return tree


def _delete(tree: dict[str, Any], dotted: str) -> None:
    *parents, last = dotted.split(".")
    node: Any = tree
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


def check_script(script: Path, base: dict[str, Any], root: Path) -> ScriptResult:
    name = str(script.relative_to(root))
    engine = [e for e in OTHER_ENGINES if e in script.name]
    if engine:
        return ScriptResult(name, "skipped", f"a {engine[0]} script")
    try:
        arguments = capture_arguments(script)
    except (RuntimeError, subprocess.TimeoutExpired) as err:
        return ScriptResult(name, "failed", str(err))
    if arguments is None:
        return ScriptResult(name, "skipped", f"no {TRAINER_MODULE} call")
    reason = non_fsdp_reason(arguments)
    if reason:
        return ScriptResult(name, "skipped", reason)
    doc = parse_document(apply_overrides(base, arguments), name)
    result = validate_document(doc)
    if result.ok:
        problems = start_problems(doc)
        if not problems:
            return ScriptResult(name, "pass")
        return ScriptResult(
            name,
            "start-refused",
            problems=[p.render() for p in problems],
            keys=[p.path for p in problems],
        )
    return ScriptResult(
        name,
        "refused",
        problems=[p.render() for p in result.errors],
        keys=[p.path for p in result.errors],
    )


def start_problems(doc: Document) -> list[Problem]:
    """What the runtime's start checks refuse in a valid ``doc`` (none: it starts)."""
    job = plan_document(doc)
    shipped = load_plan_json(job.plan.to_json())
    if shipped != job.plan:
        return [Problem(doc.prefix, "the plan changes in its JSON round trip", "a kuberl bug")]
    try:
        check_runtime(RunConfig(shipped), job.config_path)
        actor_model_spec(shipped)
        if isinstance(shipped, RunPlan) and not shipped.reward_function.path:
            reward_manager_for(shipped.reward_function)
    except SpecInvalid as err:
        return [p for p in err.problems if not _no_vllm_here(p)]
    return []


def _no_vllm_here(problem: Problem) -> bool:
    return problem.path.endswith("rollout.name") and "not installed" in problem.message


def check_directory(directory: Path, base: dict[str, Any]) -> list[ScriptResult]:
    return [check_script(s, base, directory) for s in sorted(directory.rglob("*.sh"))]


def report(results: list[ScriptResult], top: int) -> str:
    lines = []
    for r in results:
        lines.append(f"{r.status:8} {r.script}" + (f"  ({r.detail})" if r.detail else ""))
        lines += [f"           {p}" for p in r.problems]
    judged = [r for r in results if r.status in ("pass", "refused", "start-refused")]
    counts = collections.Counter(r.status for r in results)
    valid = counts["pass"] + counts["start-refused"]
    lines.append("")
    lines.append(
        f"FSDP trainer scripts: {valid}/{len(judged)} validate "
        f"({100 * valid / max(len(judged), 1):.0f}%), {counts['pass']} of them pass the start "
        f"checks; skipped {counts['skipped']}, failed to run {counts['failed']}"
    )
    tally = collections.Counter(key for r in judged for key in set(r.keys))
    if tally:
        lines.append(f"most frequent refusals (scripts per key, top {top}):")
        lines += [f"  {n:3} {key}" for key, n in tally.most_common(top)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, help="verl example scripts (searched for *.sh)")
    parser.add_argument("--base", type=Path, default=None, help="verl's generated default config")
    parser.add_argument("--top", type=int, default=25, help="refused keys to list")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    base = load_yaml((args.base or verl_generated_config()).read_text())
    log.info("%s", report(check_directory(args.directory, base), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
