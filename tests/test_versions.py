"""One version set: pyproject's pins, the images' pins and the installed packages agree with vLLM.

vLLM pins torch exactly and caps transformers; the CUDA image installs vLLM next to kuberl's
runtime extra, so every pin both name must satisfy vLLM's own requirements (read from the
installed vLLM's metadata), the images must pin the same versions as pyproject, and the test
environment must run exactly those versions (what the tests prove is what the image runs).
"""

from __future__ import annotations

import importlib.metadata as md
import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
# versions.env key -> the PyPI name it pins in the CUDA image
IMAGE_PINS = {
    "TORCH_VERSION": "torch",
    "TRANSFORMERS_VERSION": "transformers",
    "VLLM_VERSION": "vllm",
    "RAY_VERSION": "ray",
}


def _env_pins() -> dict[str, str]:
    lines = (REPO / "images" / "versions.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def _pyproject_pins() -> dict[str, str]:
    """name -> exact version, over the runtime and vllm extras."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = {}
    for extra in ("runtime", "vllm"):
        for line in project["optional-dependencies"][extra]:
            req = Requirement(line)
            (spec,) = req.specifier
            assert spec.operator == "==", f"{line}: the runtime pins exact versions"
            pins[canonicalize_name(req.name)] = spec.version
    return pins


def _vllm_requirements() -> list[Requirement]:
    env = {**default_environment(), "extra": ""}
    reqs = [Requirement(r) for r in md.requires("vllm") or []]
    return [r for r in reqs if r.marker is None or r.marker.evaluate(env)]


def test_pyproject_pins_satisfy_vllms_requirements():
    pins = _pyproject_pins()
    checked = []
    for req in _vllm_requirements():
        name = canonicalize_name(req.name)
        if name in pins:
            assert req.specifier.contains(pins[name], prereleases=True), (
                f"pyproject pins {name}=={pins[name]} but vllm {pins['vllm']} requires {req}"
            )
            checked.append(name)
    assert {"torch", "transformers", "numpy", "tokenizers", "safetensors"} <= set(checked)


def test_image_pins_equal_pyproject_pins_and_satisfy_vllm():
    env, pins = _env_pins(), _pyproject_pins()
    for key, name in IMAGE_PINS.items():
        assert env[key] == pins[name], (
            f"images/versions.env {key}={env[key]}, pyproject {pins[name]}"
        )
    vllm_reqs = {canonicalize_name(r.name): r for r in _vllm_requirements()}
    for key, name in IMAGE_PINS.items():
        if name in vllm_reqs:
            assert vllm_reqs[name].specifier.contains(env[key], prereleases=True), (key, env[key])


@pytest.mark.parametrize("name", ["torch", "transformers", "vllm", "numpy", "ray", "peft"])
def test_the_test_environment_runs_the_pinned_versions(name):
    installed = md.version(name).split("+")[0]
    assert installed == _pyproject_pins()[name], f"installed {name} {installed}"


def test_cuda_base_image_matches_torchs_cuda_major():
    """flash-attn compiles with the base image's nvcc; torch refuses a different CUDA major."""
    import torch

    image = _env_pins()["CUDA_IMAGE"]
    match = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.\d+-cudnn-devel-ubuntu\d+\.\d+", image)
    assert match, image
    assert torch.version.cuda is not None, "the pinned torch wheel is a CUDA build"
    assert match.group(1) == torch.version.cuda.split(".")[0], (image, torch.version.cuda)


def test_npu_pins_belong_together():
    """torch_npu X.Y.Z(.postN) is built for torch X.Y.Z; vllm-ascend follows its vLLM release."""
    env = _env_pins()
    assert env["TORCH_NPU_VERSION"].split(".post")[0] == env["NPU_TORCH_VERSION"]
    assert env["VLLM_ASCEND_VERSION"].split(".post")[0] == env["NPU_VLLM_VERSION"]


def test_the_dry_runs_validated_torch_is_the_pinned_torch():
    """The rank-0 memory check enforces its verdict only under the torch it was checked with."""
    from kuberl_runtime.dryrun.from_plan import VALIDATED_TORCH

    pinned = _pyproject_pins()["torch"]
    assert pinned.startswith(VALIDATED_TORCH + "."), (pinned, VALIDATED_TORCH)
