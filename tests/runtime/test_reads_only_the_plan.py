"""The run plan is the only config the runtime reads: no runtime module imports the raw config
models (``kuberl_api.backend_config``) or the effective-config builder, except the one edge
(``kuberl_runtime/config.py``, which validates and plans) and the modules listed below, which
import a model class for type annotations only and receive plan sections at run time."""

import ast
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[2] / "runtime" / "kuberl_runtime"
FORBIDDEN = ("kuberl_api.backend_config", "kuberl_api.effective")
EDGE = {"config.py"}
# Annotation-only imports still to move to kuberl_api.plan.sections (owners: engine/, rollout/,
# dryrun/). Shrink this list; never grow it.
ANNOTATIONS_ONLY = {
    "engine/actor.py",
    "engine/critic.py",
    "engine/fsdp.py",
    "engine/optim.py",
    "engine/init.py",
    "rollout/vllm.py",
    "dryrun/run.py",
}


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
        if name in EDGE or name in ANNOTATIONS_ONLY:
            continue
        imports = _raw_config_imports(path)
        if imports:
            offenders[name] = imports
    assert offenders == {}, f"read kuberl_api.plan instead: {offenders}"


def test_the_annotation_only_list_is_not_stale():
    present = [n for n in ANNOTATIONS_ONLY if (RUNTIME / n).exists()]
    stale = [n for n in present if not _raw_config_imports(RUNTIME / n)]
    assert stale == [], f"no longer import the raw models; drop them from the list: {stale}"


def test_the_trainer_and_launchers_read_the_plan():
    for name in ("trainer/components.py", "trainer/loop.py", "launcher/worker.py"):
        text = (RUNTIME / name).read_text()
        assert "plan" in text and "backend_config" not in text, name
