"""Every accelerator kuberl runs on, in one table: what each plane needs to know about it.

A row per device kind, keyed by the device type torch uses (``trainer.device``). The spec's
enum of worker-pool accelerators (Kubernetes resource names), the config's and the plan's device
literals, the operator's Ray resources, the runtime's backend and env names, and the dry run's
memory per accelerator model are all read from here. Adding an accelerator is a new row in
``KINDS`` (and its expected values in ``tests/api/test_accelerators.py``); nothing else changes.

The operator uses the same idea as KubeRay's map from a container's extended resource to the
Ray resource it provides, extended with the facts the data plane needs.
"""

from dataclasses import dataclass, field
from typing import Literal

# The spec's word for a worker pool without accelerators (``accelerator.type: none``).
NO_ACCELERATOR = "none"


@dataclass(frozen=True)
class AcceleratorKind:
    """One accelerator kind, as every plane sees it."""

    device: str
    """torch's device type (``torch.device(device, rank)``, ``torch.<device>``)."""
    label: str
    """How messages name it: "GPU", "NPU"."""
    k8s_resource: str | None
    """The device plugin's extended resource a pod requests; None for CPU pools."""
    backend: str
    """The torch.distributed backend of its collectives."""
    ray_resource: str
    """The Ray resource one rank occupies."""
    kuberay_maps_resource: bool
    """KubeRay turns ``k8s_resource`` into ``ray_resource`` by itself; else the operator
    declares the resource on the worker group."""
    visible_devices_env: str
    """The env var that restricts which accelerators a process sees ("" on CPU)."""
    ray_noset_visible_devices_env: str
    """Set so Ray leaves ``visible_devices_env`` to the launcher ("" on CPU)."""
    alloc_conf_env: str
    """The caching-allocator settings variable ("" on CPU)."""
    env_prefixes: tuple[str, ...]
    """Env vars that tune its collectives and runtime, forwarded to every rank."""
    torch_plugin: str | None
    """The package that registers the device with torch (``torch_npu``), None if built in."""
    native_varlen: bool
    """torch ships a flash varlen attention kernel for it (packed sequences)."""
    mixed_precision: bool
    """bf16 training; CPU kernels for bf16 matmuls are slow and not bitwise-stable."""
    cuda_kernels: bool
    """Runs the CUDA-only kernels: SGLang rollout, Liger."""
    vllm_package: str
    """The vLLM build that serves rollouts on it."""
    memory_gib: dict[str, float] = field(default_factory=dict)
    """Memory one accelerator of each model offers a process, GiB (the driver's total, as torch
    reports it): what the dry run and ``kuberl plan`` check a job against."""
    plan_model: str | None = None
    """The model ``kuberl plan`` assumes for a job on this device without --accelerator."""


KINDS: dict[str, AcceleratorKind] = {
    "cuda": AcceleratorKind(
        device="cuda",
        label="GPU",
        k8s_resource="nvidia.com/gpu",
        backend="nccl",
        ray_resource="GPU",
        kuberay_maps_resource=True,
        visible_devices_env="CUDA_VISIBLE_DEVICES",
        ray_noset_visible_devices_env="RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
        alloc_conf_env="PYTORCH_CUDA_ALLOC_CONF",
        env_prefixes=("NCCL_",),
        torch_plugin=None,
        native_varlen=True,
        mixed_precision=True,
        cuda_kernels=True,
        vllm_package="vllm",
        memory_gib={
            "H100": 79.1,  # H100 SXM 80 GB HBM3
            "H200": 139.8,  # H200 141 GB HBM3e
            "A100": 79.1,  # A100 80 GB
        },
        plan_model="H100",
    ),
    "npu": AcceleratorKind(
        device="npu",
        label="NPU",
        k8s_resource="huawei.com/Ascend910",
        backend="hccl",
        ray_resource="NPU",
        kuberay_maps_resource=False,  # KubeRay (through v1.7) maps only GPUs by itself
        visible_devices_env="ASCEND_RT_VISIBLE_DEVICES",
        ray_noset_visible_devices_env="RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES",
        alloc_conf_env="PYTORCH_NPU_ALLOC_CONF",
        env_prefixes=("HCCL_", "ASCEND_"),
        torch_plugin="torch_npu",
        native_varlen=False,
        mixed_precision=True,
        cuda_kernels=False,
        vllm_package="vllm-ascend",
        memory_gib={"910B": 60.9},  # Ascend 910B 64 GB HBM
        plan_model="910B",
    ),
    "cpu": AcceleratorKind(
        device="cpu",
        label="CPU",
        k8s_resource=None,
        backend="gloo",
        ray_resource="CPU",
        kuberay_maps_resource=True,  # from the container's CPU request
        visible_devices_env="",
        ray_noset_visible_devices_env="",
        alloc_conf_env="",
        env_prefixes=(),
        torch_plugin=None,
        native_varlen=False,
        mixed_precision=False,
        cuda_kernels=False,
        vllm_package="vllm",
    ),
}

# `kuberl plan` of a job whose device names no model (cpu, or "auto") plans against this one.
PLAN_FALLBACK_MODEL = "H100"

DEVICES: tuple[str, ...] = tuple(KINDS)
# The spec's worker-pool accelerator types, in table order; the CPU row is "none".
ACCELERATOR_TYPES: tuple[str, ...] = tuple(k.k8s_resource or NO_ACCELERATOR for k in KINDS.values())
DeviceType = Literal[DEVICES]  # type: ignore[valid-type]
AcceleratorType = Literal[ACCELERATOR_TYPES]  # type: ignore[valid-type]

# Every accelerator model the dry run knows, with its memory per device (GiB).
MEMORY_GIB: dict[str, float] = {
    model: gib for kind in KINDS.values() for model, gib in kind.memory_gib.items()
}
# Env var prefixes forwarded to every rank, whatever the job's device.
ENV_PREFIXES: tuple[str, ...] = tuple(p for kind in KINDS.values() for p in kind.env_prefixes)


def kind_of_resource(accelerator_type: str) -> AcceleratorKind:
    """The row of a worker pool's ``accelerator.type`` ("none" is the CPU row)."""
    for kind in KINDS.values():
        if (kind.k8s_resource or NO_ACCELERATOR) == accelerator_type:
            return kind
    known = ", ".join(ACCELERATOR_TYPES)
    raise KeyError(f"accelerator type {accelerator_type!r} is not one of {known}")


def plan_model(device: str) -> str:
    """The accelerator model ``kuberl plan`` assumes for a job on ``device``."""
    kind = KINDS.get(device)
    return (kind.plan_model if kind else None) or PLAN_FALLBACK_MODEL
