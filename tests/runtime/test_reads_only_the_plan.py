"""The run plan is the only config the runtime reads: no runtime module imports the raw config
models (``kuberl_api.backend_config``), the validator or the effective-config builder. The edge
(``kuberl_runtime/config.py``) loads a plan as is, or resolves a config through the operator's
resolver (``kuberl_api.plan.from_document``), and names only the error type of a refused job
(``kuberl_api.validation.problems``). pyproject's import-linter contract says the same for
``lint-imports``; this test keeps it in the unit suite."""

import ast
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[2] / "runtime" / "kuberl_runtime"
FORBIDDEN = ("kuberl_api.backend_config", "kuberl_api.effective", "kuberl_api.validation")
ALLOWED = {"config.py": ["kuberl_api.validation.problems"]}


def _raw_config_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found += [n for n in names if n.startswith(FORBIDDEN)]
    return found


def test_no_runtime_module_reads_the_raw_config_models():
    offenders = {}
    for path in sorted(RUNTIME.rglob("*.py")):
        name = path.relative_to(RUNTIME).as_posix()
        imports = _raw_config_imports(path)
        if imports != ALLOWED.get(name, []):
            offenders[name] = imports
    assert offenders == {}, f"read kuberl_api.plan instead: {offenders}"


def test_the_edge_resolves_a_config_with_the_operators_resolver():
    tree = ast.parse((RUNTIME / "config.py").read_text())
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "kuberl_api.plan.from_document" in modules


def test_the_trainer_and_launchers_read_the_plan():
    for name in ("trainer/components.py", "trainer/loop.py", "launcher/worker.py"):
        text = (RUNTIME / name).read_text()
        assert "plan" in text and "backend_config" not in text, name


def _or_none(path: Path) -> list[str]:
    """`x or None` expressions: a plan value turned back into verl's null."""
    return [
        ast.unparse(node)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.BoolOp)
        and isinstance(node.op, ast.Or)
        and isinstance(node.values[-1], ast.Constant)
        and node.values[-1].value is None
    ]


# peft saves exclude_modules as written in the adapter's config ([] and null differ there).
KEPT_OR_NONE = {"components.py": ["model.exclude_modules or None"]}


def test_the_trainer_passes_the_plans_decisions_as_they_are():
    """The plan spells "unset" once (0 / "": keep every checkpoint, the whole shard, no turn
    limit, no tool file); the trainer hands it on instead of deciding it again."""
    found = {
        path.name: _or_none(path)
        for path in sorted((RUNTIME / "trainer").glob("*.py"))
        if _or_none(path)
    }
    assert found == KEPT_OR_NONE


def test_the_plan_carries_the_unset_meanings():
    import yaml

    from kuberl_runtime.config import run_config_from_dict

    tree = yaml.safe_load((RUNTIME.parents[1] / "examples" / "demo.yaml").read_text())
    tree["trainer"].pop("max_actor_ckpt_to_keep")
    del tree["actor_rollout_ref"]["ref"]["log_prob_micro_batch_size_per_gpu"]
    tree["actor_rollout_ref"]["ref"]["log_prob_use_dynamic_bsz"] = True
    plan = run_config_from_dict(tree).plan
    assert plan.trainer.max_ckpt_to_keep == 0
    assert plan.ref.log_prob_micro_batch_size_per_gpu == 0
    assert plan.reward_model.micro_batch_size_per_gpu == 0
    assert plan.model.external_lib == plan.model.lora_adapter_path == ""
    turns = plan.rollout.multi_turn
    assert (turns.max_assistant_turns, turns.max_user_turns) == (0, 0)
    assert turns.tool_config_path == turns.function_tool_path == ""
