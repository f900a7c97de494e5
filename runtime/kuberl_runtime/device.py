"""The runtime's view of the accelerator: cuda / npu / cpu, its collective backend and env.

What each accelerator is (backend, env names, Ray and Kubernetes resources, its torch plugin)
is a row of `kuberl_api.accelerators`, the table every plane reads; this module turns the row of
`trainer.device` into the calls the runtime makes (`resolve_device`, `Device.torch_device`,
`Device.bind`). Nothing else in the runtime branches on the accelerator kind; a test scans the
product code for the table's names outside the table.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from dataclasses import dataclass
from types import ModuleType

import torch

from kuberl_api.accelerators import ENV_PREFIXES, KINDS, AcceleratorKind, DeviceType

logger = logging.getLogger(__name__)

# Env vars that tune the accelerators' collectives and runtime (forwarded to every rank).
ACCELERATOR_ENV_PREFIXES = ENV_PREFIXES


@dataclass(frozen=True)
class Device:
    type: DeviceType

    @property
    def kind(self) -> AcceleratorKind:
        """This device's row of the accelerator table."""
        return KINDS[self.type]

    @property
    def backend(self) -> str:
        """The torch.distributed backend for this accelerator."""
        return self.kind.backend

    @property
    def visible_devices_env(self) -> str:
        """The env var that restricts which accelerators a process sees ("" on CPU)."""
        return self.kind.visible_devices_env

    @property
    def ray_noset_visible_devices_env(self) -> str:
        """Set in a Ray actor's env so Ray leaves `visible_devices_env` to the launcher.

        Ray sets the visible-devices variable of every actor to the accelerators it was given
        unless this is set; the Ray launcher sets it and gives each node's ranks the node's whole
        list instead (LOCAL_RANK picks the rank's own), which is what collectives and vLLM's TP
        workers expect.
        """
        return self.kind.ray_noset_visible_devices_env

    @property
    def ray_resource(self) -> str:
        """The Ray resource one rank occupies ("GPU", "NPU", or "CPU")."""
        return self.kind.ray_resource

    @property
    def k8s_resource_name(self) -> str | None:
        """The Kubernetes extended resource of one accelerator; None on CPU."""
        return self.kind.k8s_resource

    @property
    def alloc_conf_env(self) -> str:
        """The caching-allocator settings variable ("" on CPU); launchers forward it to ranks."""
        return self.kind.alloc_conf_env

    def ray_actor_options(self) -> dict[str, object]:
        """Resources one rank asks Ray for: a CPU on CPU, else one accelerator and no CPU.

        GPUs are Ray's built-in `num_gpus`; other accelerators are custom resources.
        """
        if self.ray_resource == "CPU":
            return {"num_cpus": 1}
        if self.ray_resource == "GPU":
            return {"num_cpus": 0, "num_gpus": 1}
        return {"num_cpus": 0, "resources": {self.ray_resource: 1}}

    def ray_bundle(self, ranks_per_node: int) -> dict[str, float]:
        """The placement-group bundle that holds one node's ranks."""
        return {self.ray_resource: float(ranks_per_node)}

    @property
    def has_native_varlen(self) -> bool:
        """torch ships a flash varlen attention kernel for this accelerator (packed sequences)."""
        return self.kind.native_varlen

    @property
    def supports_mixed_precision(self) -> bool:
        return self.kind.mixed_precision

    def torch_device(self, local_rank: int = 0) -> torch.device:
        if self.type == "cpu":
            return torch.device("cpu")
        return torch.device(self.type, local_rank)

    def _torch_module(self) -> ModuleType | None:
        """torch.cuda, or torch.npu once torch_npu is imported; None on CPU."""
        return None if self.type == "cpu" else getattr(torch, self.type)

    def bind(self, local_rank: int) -> torch.device:
        """Make `local_rank`'s accelerator current for this process; returns it."""
        device = self.torch_device(local_rank)
        if accel := self._torch_module():
            accel.set_device(device)
        return device

    def max_memory_gb(self) -> tuple[float, float]:
        """(allocated, reserved) peaks in GiB; zeros on CPU."""
        if not (accel := self._torch_module()):
            return 0.0, 0.0
        return accel.max_memory_allocated() / 2**30, accel.max_memory_reserved() / 2**30

    def reset_peak_memory(self) -> None:
        if accel := self._torch_module():
            accel.reset_peak_memory_stats()

    def empty_cache(self) -> None:
        if accel := self._torch_module():
            accel.empty_cache()

    def synchronize(self) -> None:
        """Wait for queued kernels (timings); a no-op on CPU."""
        if accel := self._torch_module():
            accel.synchronize()


def import_torch_plugin(device_type: str) -> bool:
    """Import the package that adds `device_type` to torch (torch_npu); False if not installed."""
    plugin = KINDS[device_type].torch_plugin
    if plugin is None:
        return True
    if importlib.util.find_spec(plugin) is None:
        return False
    importlib.import_module(plugin)
    return True


def requested_device(name: str | None) -> Device:
    """`trainer.device` as written, without checking this machine (launchers place ranks on
    other machines: the Ray head that starts a GPU job has no GPU itself)."""
    if name not in KINDS:
        return Device("cpu")
    return Device(name)  # type: ignore[arg-type]


def detect_device_type() -> DeviceType:
    """The first accelerator of the table this machine has (its torch plugin imported), else
    cpu."""
    accelerators = [device for device in KINDS if device != "cpu"]
    for device in accelerators:
        if import_torch_plugin(device) and getattr(torch, device).is_available():
            return device
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
    env = KINDS[requested].visible_devices_env if requested in KINDS else ""
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
