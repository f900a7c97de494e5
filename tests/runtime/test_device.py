"""The runtime's Device reads its accelerator's row of `kuberl_api.accelerators` (the table's own
facts are tested in tests/api/test_accelerators.py, its one-file rule in
tests/test_accelerator_table.py)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from kuberl_api.accelerators import KINDS
from kuberl_runtime import device as device_module
from kuberl_runtime.device import (
    ACCELERATOR_ENV_PREFIXES,
    Device,
    detect_device_type,
    requested_device,
)


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
    assert device.kind is KINDS[kind]
    assert device.backend == backend
    assert device.visible_devices_env == visible
    assert device.ray_noset_visible_devices_env == noset
    assert device.ray_resource == ray
    assert device.k8s_resource_name == k8s
    assert device.alloc_conf_env == alloc
    assert device.ray_bundle(8) == {ray: 8.0}
    assert device.supports_mixed_precision == (kind != "cpu")


def test_every_accelerators_env_is_forwarded():
    assert ACCELERATOR_ENV_PREFIXES == ("NCCL_", "HCCL_", "ASCEND_")


def test_ray_actor_options():
    assert Device("cpu").ray_actor_options() == {"num_cpus": 1}
    assert Device("cuda").ray_actor_options() == {"num_cpus": 0, "num_gpus": 1}
    assert Device("npu").ray_actor_options() == {"num_cpus": 0, "resources": {"NPU": 1}}


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


def test_accelerator_calls_go_to_torchs_module_of_the_device(monkeypatch):
    calls: list[str] = []
    fake_npu = types.SimpleNamespace(
        empty_cache=lambda: calls.append("empty_cache"),
        synchronize=lambda: calls.append("synchronize"),
        reset_peak_memory_stats=lambda: calls.append("reset"),
        max_memory_allocated=lambda: 2**31,
        max_memory_reserved=lambda: 2**32,
    )
    monkeypatch.setattr(torch, "npu", fake_npu, raising=False)
    npu = Device("npu")
    npu.empty_cache()
    npu.synchronize()
    npu.reset_peak_memory()
    assert calls == ["empty_cache", "synchronize", "reset"]
    assert npu.max_memory_gb() == (2.0, 4.0)


def test_cpu_has_no_accelerator_calls():
    cpu = Device("cpu")
    cpu.empty_cache()
    cpu.synchronize()
    cpu.reset_peak_memory()
    assert cpu.max_memory_gb() == (0.0, 0.0)
    assert cpu.bind(3) == torch.device("cpu")
