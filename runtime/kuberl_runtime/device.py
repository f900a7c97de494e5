"""The one place that decides the accelerator: cuda / npu / cpu, its collective backend and env.

Everything else asks this module (`resolve_device`, `Device.torch_device`, the Ray and Kubernetes
names below) and never branches on the accelerator kind itself; a test scans the runtime for
stray "npu" checks. The operator keeps its own copy of the Kubernetes/Ray names (it may not
import the runtime); `tests/runtime/test_device.py` compares the two.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from dataclasses import dataclass
from typing import Literal

import torch

logger = logging.getLogger(__name__)

DeviceType = Literal["cuda", "npu", "cpu"]

_BACKENDS: dict[str, str] = {"cuda": "nccl", "npu": "hccl", "cpu": "gloo"}
_VISIBLE_DEVICES_ENV: dict[str, str] = {
    "cuda": "CUDA_VISIBLE_DEVICES",
    "npu": "ASCEND_RT_VISIBLE_DEVICES",
    "cpu": "",
}
# Ray sets the visible-devices variable of every actor to the accelerators it was given unless
# this is set; the Ray launcher sets it and gives each node's ranks the node's whole list instead
# (LOCAL_RANK picks the rank's own), which is what collectives and vLLM's TP workers expect.
_RAY_NOSET_VISIBLE_DEVICES_ENV: dict[str, str] = {
    "cuda": "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
    "npu": "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES",
    "cpu": "",
}
# Ray resource names: "GPU" is built in; Ascend pools declare a custom "NPU" resource
# (operator/kuberl_operator/builders/raycluster.py: RAY_RESOURCE_BY_ACCELERATOR).
_RAY_RESOURCE: dict[str, str] = {"cuda": "GPU", "npu": "NPU", "cpu": "CPU"}
# Kubernetes extended-resource names (kuberl_api.platform.AcceleratorType); CPU pools have none.
_K8S_RESOURCE: dict[str, str | None] = {
    "cuda": "nvidia.com/gpu",
    "npu": "huawei.com/Ascend910",
    "cpu": None,
}
_ALLOC_CONF_ENV: dict[str, str] = {
    "cuda": "PYTORCH_CUDA_ALLOC_CONF",
    "npu": "PYTORCH_NPU_ALLOC_CONF",
    "cpu": "",
}
# Env vars that tune the accelerators' collectives and runtime (forwarded to every rank).
ACCELERATOR_ENV_PREFIXES = ("NCCL_", "HCCL_", "ASCEND_")
# The Python package that registers the accelerator with torch (`torch.npu`), if any.
_TORCH_PLUGIN: dict[str, str | None] = {"cuda": None, "npu": "torch_npu", "cpu": None}


@dataclass(frozen=True)
class Device:
    type: DeviceType

    @property
    def backend(self) -> str:
        """The torch.distributed backend for this accelerator."""
        return _BACKENDS[self.type]

    @property
    def visible_devices_env(self) -> str:
        """The env var that restricts which accelerators a process sees ("" on CPU)."""
        return _VISIBLE_DEVICES_ENV[self.type]

    @property
    def ray_noset_visible_devices_env(self) -> str:
        """Set in a Ray actor's env so Ray leaves `visible_devices_env` to the launcher."""
        return _RAY_NOSET_VISIBLE_DEVICES_ENV[self.type]

    @property
    def ray_resource(self) -> str:
        """The Ray resource one rank occupies ("GPU", "NPU", or "CPU")."""
        return _RAY_RESOURCE[self.type]

    @property
    def k8s_resource_name(self) -> str | None:
        """The Kubernetes extended resource of one accelerator; None on CPU."""
        return _K8S_RESOURCE[self.type]

    @property
    def alloc_conf_env(self) -> str:
        """The caching-allocator settings variable ("" on CPU); launchers forward it to ranks."""
        return _ALLOC_CONF_ENV[self.type]

    def ray_actor_options(self) -> dict[str, object]:
        """Resources one rank asks Ray for: a CPU on CPU, else one accelerator and no CPU."""
        if self.type == "cpu":
            return {"num_cpus": 1}
        if self.type == "cuda":
            return {"num_cpus": 0, "num_gpus": 1}
        return {"num_cpus": 0, "resources": {self.ray_resource: 1}}

    def ray_bundle(self, ranks_per_node: int) -> dict[str, float]:
        """The placement-group bundle that holds one node's ranks."""
        return {self.ray_resource: float(ranks_per_node)}

    @property
    def has_native_varlen(self) -> bool:
        """torch ships a flash varlen attention kernel for this accelerator (packed sequences)."""
        return self.type == "cuda"

    @property
    def supports_mixed_precision(self) -> bool:
        # CPU kernels for bf16 matmuls are slow and not bitwise-stable; keep fp32 there.
        return self.type != "cpu"

    def torch_device(self, local_rank: int = 0) -> torch.device:
        if self.type == "cpu":
            return torch.device("cpu")
        return torch.device(self.type, local_rank)

    def bind(self, local_rank: int) -> torch.device:
        """Make `local_rank`'s accelerator current for this process; returns it."""
        device = self.torch_device(local_rank)
        if self.type == "cuda":
            torch.cuda.set_device(device)
        elif self.type == "npu":
            torch.npu.set_device(device)  # type: ignore[attr-defined]
        return device

    def max_memory_gb(self) -> tuple[float, float]:
        """(allocated, reserved) peaks in GiB; zeros on CPU."""
        if self.type == "cpu":
            return 0.0, 0.0
        accel = getattr(torch, self.type)  # torch.cuda, or torch.npu once torch_npu is imported
        return accel.max_memory_allocated() / 2**30, accel.max_memory_reserved() / 2**30

    def reset_peak_memory(self) -> None:
        if self.type != "cpu":
            getattr(torch, self.type).reset_peak_memory_stats()

    def empty_cache(self) -> None:
        if self.type == "cuda":
            torch.cuda.empty_cache()
        elif self.type == "npu":
            torch.npu.empty_cache()  # type: ignore[attr-defined]

    def synchronize(self) -> None:
        """Wait for queued kernels (timings); a no-op on CPU."""
        if self.type == "cuda":
            torch.cuda.synchronize()
        elif self.type == "npu":
            torch.npu.synchronize()  # type: ignore[attr-defined]


def import_torch_plugin(device_type: str) -> bool:
    """Import the package that adds `device_type` to torch (torch_npu); False if not installed."""
    plugin = _TORCH_PLUGIN[device_type]
    if plugin is None:
        return True
    if importlib.util.find_spec(plugin) is None:
        return False
    importlib.import_module(plugin)
    return True


def requested_device(name: str | None) -> Device:
    """`trainer.device` as written, without checking this machine (launchers place ranks on
    other machines: the Ray head that starts a GPU job has no GPU itself)."""
    if name not in _BACKENDS:
        return Device("cpu")
    return Device(name)  # type: ignore[arg-type]


def detect_device_type() -> DeviceType:
    if torch.cuda.is_available():
        return "cuda"
    if import_torch_plugin("npu") and torch.npu.is_available():  # type: ignore[attr-defined]
        return "npu"
    return "cpu"


class DeviceUnavailable(RuntimeError):
    """`trainer.device` names an accelerator this machine does not have."""


def resolve_device(requested: str | None) -> Device:
    """`trainer.device` as the run plan says, checked against this machine.

    "auto" (no device written and no worker pool to derive it from) takes what this machine
    has and says so. An accelerator that is not visible is an error, never a silent CPU run.
    """
    available = detect_device_type()
    if requested in (None, "auto"):
        logger.info("trainer.device not set: using %s, what this machine has", available)
        return Device(available)
    if requested in (available, "cpu"):
        return Device(requested)  # type: ignore[arg-type]
    env = _VISIBLE_DEVICES_ENV.get(requested, "")
    raise DeviceUnavailable(
        f"trainer.device is {requested}, but no {requested} device is visible on this machine "
        f"(it has {available}; {env}={os.environ.get(env, '<unset>')}). Run where one is "
        "visible, or set trainer.device: cpu (or leave it unset) to train on what is here"
    )


def threads_per_rank(world_size: int) -> int:
    """CPU threads for one rank: OMP_NUM_THREADS when set, else the cores shared evenly.

    On a busy machine fewer threads are faster: OpenMP barriers stall on descheduled threads, so
    set OMP_NUM_THREADS=1 where other work shares the cores (tests do).
    """
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // max(1, world_size))
