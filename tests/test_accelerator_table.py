"""Adding an accelerator touches one file: `api/kuberl_api/accelerators.py`.

Two proofs. No product code outside the table spells an accelerator's facts (its Kubernetes
resource, backend, env names, torch plugin, custom Ray resource, models). And a copy of the API
package with one extra row in the table, and nothing else changed, is accepted end to end: the
spec, the configs' and plan's device, validation, the operator's RayCluster, the runtime's
device, the dry run's memory table and `kuberl plan`'s default all know the new accelerator.
"""

import ast
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from kuberl_api import accelerators
from kuberl_api.accelerators import KINDS, AcceleratorKind

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ["api/kuberl_api", "cli/kuberl_cli", "operator/kuberl_operator", "runtime/kuberl_runtime"]
TABLE = Path(accelerators.__file__).resolve()

# Literals that name an accelerator outside the table for a reason of their own, not as a fact a
# new accelerator would need a sibling for.
ALLOWED = {
    # torch's CUDA RNG state (torch.cuda.get_rng_state_all), saved beside the CPU one.
    ("runtime/kuberl_runtime/trainer/state.py", "cuda"),
    # torch.random.fork_rng's device type where torch reports no accelerator.
    ("runtime/kuberl_runtime/rollout/vllm_engine.py", "cuda"),
    # The dry run plans a GPU run's precision and offload decisions on fake storage, against an
    # H100 unless told otherwise.
    ("runtime/kuberl_runtime/dryrun/run.py", "cuda"),
    ("runtime/kuberl_runtime/dryrun/run.py", "H100"),
    ("runtime/kuberl_runtime/dryrun/survey.py", "cuda"),
}


def _facts(kind: AcceleratorKind) -> set[str]:
    """What a row says that only that accelerator has (CPU is the row of no accelerator; Ray's
    built-in GPU/CPU resources and the vllm package are not one accelerator's)."""
    if kind.device == "cpu":
        return set()
    facts = {
        kind.device,
        kind.backend,
        kind.visible_devices_env,
        kind.ray_noset_visible_devices_env,
        kind.alloc_conf_env,
        *kind.env_prefixes,
        *kind.memory_gib,
    }
    facts |= {v for v in (kind.k8s_resource, kind.torch_plugin, kind.plan_model) if v}
    if not kind.kuberay_maps_resource:
        facts.add(kind.ray_resource)
    return facts


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)  # a lambda's body is one expression, not a list
        for statement in body if isinstance(body, list) else []:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                found.add(id(statement.value))
    return found


def _names(path: Path) -> list[tuple[int, str]]:
    """String constants in code (f-string parts included, docstrings left out), attribute names
    (``torch.npu``) and imported modules (``import torch_npu``)."""
    tree = ast.parse(path.read_text())
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            modules = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
            found += [(node.lineno, module.split(".")[0]) for module in modules]
    return found


def test_no_accelerator_fact_is_spelled_outside_the_table():
    facts = set().union(*(_facts(kind) for kind in KINDS.values()))
    assert {"nvidia.com/gpu", "huawei.com/Ascend910", "hccl", "nccl", "npu", "NPU"} <= facts
    offenders = [
        f"{relative}:{line}: {value!r}"
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.resolve() != TABLE
        for relative in [str(path.relative_to(ROOT))]
        for line, value in _names(path)
        if value in facts and (relative, value) not in ALLOWED
    ]
    assert offenders == [], "move these into kuberl_api/accelerators.py and read them from there"


XPU_ROW = """\
    "xpu": AcceleratorKind(
        device="xpu",
        label="XPU",
        k8s_resource="gpu.intel.com/xe",
        backend="xccl",
        ray_resource="XPU",
        kuberay_maps_resource=False,
        visible_devices_env="ZE_AFFINITY_MASK",
        ray_noset_visible_devices_env="RAY_EXPERIMENTAL_NOSET_ONEAPI_DEVICE_SELECTOR",
        alloc_conf_env="PYTORCH_XPU_ALLOC_CONF",
        env_prefixes=("CCL_",),
        torch_plugin=None,
        native_varlen=False,
        mixed_precision=True,
        cuda_kernels=False,
        vllm_package="vllm-xpu",
        memory_gib={"Max1550": 64.0},
        plan_model="Max1550",
    ),
"""

# Runs against the copy of kuberl_api with the XPU row; the other packages are the installed ones.
CHECK_EVERY_PLANE = """
import argparse
from pathlib import Path

import kuberl_api
from kuberl_api.accelerators import kind_of_resource, plan_model
from kuberl_api.backend_config.trainer import TrainerConfig
from kuberl_api.crd import build_crd
from kuberl_api.plan import build_run_plan
from kuberl_api.validation import parse_document, validate_document
from kuberl_cli import plan as plan_command
from kuberl_operator.builders import JobRef, build_raycluster
from kuberl_runtime.device import ACCELERATOR_ENV_PREFIXES, Device, requested_device
from kuberl_runtime.dryrun.shapes import ACCELERATORS
from support.manifests import valid_manifest, with_changes

assert Path(kuberl_api.__file__).parent == Path(COPY), kuberl_api.__file__
POOL = {"name": "xpu", "nodes": 1, "accelerator": {"type": "gpu.intel.com/xe", "perNode": 4}}

def validate(changes):
    return validate_document(parse_document(with_changes(valid_manifest(), changes)))

result = validate({"spec.workerPools": [POOL]})
assert result.ok, [p.render() for p in result.errors]
assert build_run_plan(result.backend_config).placement.device == "xpu"
assert TrainerConfig(device="xpu").device == "xpu"
sglang = validate({"spec.workerPools": [POOL],
                   "spec.backend_config.actor_rollout_ref.rollout.name": "sglang"})
assert [p.render() for p in sglang.errors if "CUDA-only" in p.render()], sglang.errors
assert any("use vllm (vllm-xpu) on XPU" in p.render() for p in sglang.errors)
crd = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
pool = crd["properties"]["spec"]["properties"]["workerPools"]["items"]["properties"]
assert "gpu.intel.com/xe" in pool["accelerator"]["properties"]["type"]["enum"]

group = build_raycluster(JobRef("j", "ns", "uid"), result.spec, 1, "img")["spec"][
    "workerGroupSpecs"][0]
assert group["resources"] == {"XPU": "4"}, group.get("resources")
assert group["template"]["spec"]["containers"][0]["resources"]["limits"]["gpu.intel.com/xe"] == "4"

device = requested_device("xpu")
assert (device.backend, device.ray_resource, device.visible_devices_env) == (
    "xccl", "XPU", "ZE_AFFINITY_MASK")
assert device.ray_actor_options() == {"num_cpus": 0, "resources": {"XPU": 1}}
assert str(device.torch_device(1)) == "xpu:1"
assert "CCL_" in ACCELERATOR_ENV_PREFIXES
assert ACCELERATORS["Max1550"] == 64.0
assert plan_model("xpu") == "Max1550" and kind_of_resource("gpu.intel.com/xe").device == "xpu"
parser = argparse.ArgumentParser()
plan_command.add_arguments(parser)
assert "Max1550 for a trainer.device xpu job" in " ".join(parser.format_help().split())
print("every plane knows xpu")
"""


def test_one_new_row_is_enough_for_every_plane(tmp_path):
    copy = tmp_path / "kuberl_api"
    shutil.copytree(TABLE.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    table = copy / "accelerators.py"
    source = table.read_text()
    before_cpu = '    "cpu": AcceleratorKind(\n'
    assert source.count(before_cpu) == 1
    table.write_text(source.replace(before_cpu, XPU_ROW + before_cpu))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "tests")]),
        "OMP_NUM_THREADS": "1",
    }
    script = f"COPY = {str(copy)!r}\n" + textwrap.dedent(CHECK_EVERY_PLANE)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip() == "every plane knows xpu"
