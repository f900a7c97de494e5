"""The device module is the one place that knows cuda / npu / cpu (names, env, Ray, Kubernetes)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest
import torch

from kuberl_runtime import device as device_module
from kuberl_runtime.device import Device, detect_device_type, requested_device

RUNTIME = Path(device_module.__file__).resolve().parent


@pytest.mark.parametrize(
    ("kind", "backend", "visible", "noset", "ray", "k8s", "alloc"),
    [
        ("cuda", "nccl", "CUDA_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
         "GPU", "nvidia.com/gpu", "PYTORCH_CUDA_ALLOC_CONF"),
        ("npu", "hccl", "ASCEND_RT_VISIBLE_DEVICES",
         "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES", "NPU", "huawei.com/Ascend910",
         "PYTORCH_NPU_ALLOC_CONF"),
        ("cpu", "gloo", "", "", "CPU", None, ""),
    ],
)  # fmt: skip
def test_mapping(kind, backend, visible, noset, ray, k8s, alloc):
    device = Device(kind)
    assert device.backend == backend
    assert device.visible_devices_env == visible
    assert device.ray_noset_visible_devices_env == noset
    assert device.ray_resource == ray
    assert device.k8s_resource_name == k8s
    assert device.alloc_conf_env == alloc
    assert device.ray_bundle(8) == {ray: 8.0}


def test_ray_actor_options():
    assert Device("cpu").ray_actor_options() == {"num_cpus": 1}
    assert Device("cuda").ray_actor_options() == {"num_cpus": 0, "num_gpus": 1}
    assert Device("npu").ray_actor_options() == {"num_cpus": 0, "resources": {"NPU": 1}}


def test_operator_uses_the_same_names():
    """The operator may not import the runtime (import-linter), so it keeps its own copy."""
    from kuberl_api.effective import DEVICE_BY_ACCELERATOR
    from kuberl_operator.builders.raycluster import RAY_RESOURCE_BY_ACCELERATOR

    for accelerator, kind in DEVICE_BY_ACCELERATOR.items():
        device = Device(kind)
        assert device.k8s_resource_name == (None if accelerator == "none" else accelerator)
        if accelerator in RAY_RESOURCE_BY_ACCELERATOR:
            assert RAY_RESOURCE_BY_ACCELERATOR[accelerator] == device.ray_resource
    assert {Device(k).k8s_resource_name for k in ("cuda", "npu")} <= set(DEVICE_BY_ACCELERATOR)
    # GPUs use Ray's built-in resource, mapped by KubeRay itself
    assert "nvidia.com/gpu" not in RAY_RESOURCE_BY_ACCELERATOR


def test_npu_is_detected_through_torch_npu(monkeypatch):
    fake_npu = types.SimpleNamespace(is_available=lambda: True)
    plugin = types.ModuleType("torch_npu")
    plugin.__spec__ = types.SimpleNamespace(name="torch_npu")  # type: ignore[assignment]

    imported = []

    def fake_import(name):
        imported.append(name)
        monkeypatch.setattr(torch, "npu", fake_npu, raising=False)
        return plugin

    monkeypatch.setitem(sys.modules, "torch_npu", plugin)
    monkeypatch.setattr(device_module.importlib, "import_module", fake_import)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert detect_device_type() == "npu"
    assert imported == ["torch_npu"]


def test_without_torch_npu_a_cpu_machine_is_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(device_module.importlib.util, "find_spec", lambda name: None)
    assert detect_device_type() == "cpu"


def test_requested_device_does_not_look_at_this_machine():
    assert requested_device("npu") == Device("npu")
    assert requested_device("cuda") == Device("cuda")
    assert requested_device(None) == Device("cpu")


def test_nothing_else_in_the_runtime_branches_on_npu():
    # Code, not prose: comments and docstrings may mention the accelerators.
    pattern = re.compile(r"[\"']npu[\"']|\.npu\b|torch_npu|[\"']hccl|HCCL_|ASCEND|Ascend910")
    offenders = [
        f"{path.relative_to(RUNTIME)}:{number}: {line.strip()}"
        for path in RUNTIME.rglob("*.py")
        if path.name != "device.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line.split("#")[0]) and not line.strip().startswith(('"""', "`"))
    ]
    assert offenders == []
