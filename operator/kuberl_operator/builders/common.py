"""What every object a job owns carries: owner reference, labels, quantities."""

import re
from dataclasses import dataclass
from typing import Any

from kuberl_api.job import API_VERSION, KIND
from kuberl_api.platform import WorkerPool
from kuberl_operator.names import LABEL_ATTEMPT, LABEL_JOB, LABEL_QUEUE


@dataclass(frozen=True)
class JobRef:
    """The identity of one RLTrainingJob: enough to own, label and name its children."""

    name: str
    namespace: str
    uid: str

    def owner_reference(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def metadata(self, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        return {
            "name": name,
            "namespace": self.namespace,
            "labels": {LABEL_JOB: self.name, **(labels or {})},
            "ownerReferences": [self.owner_reference()],
        }


def child_labels(job: JobRef, attempt: int, queue_name: str | None) -> dict[str, str]:
    labels = {LABEL_JOB: job.name, LABEL_ATTEMPT: str(attempt)}
    if queue_name:
        labels[LABEL_QUEUE] = queue_name
    return labels


def accelerator_summary(pools: list[WorkerPool]) -> str:
    """``16xnvidia.com/gpu`` for two 8-GPU nodes; ``cpu`` when no pool has accelerators."""
    totals: dict[str, int] = {}
    for pool in pools:
        if pool.accelerator.type != "none":
            count = pool.nodes * pool.accelerator.per_node
            totals[pool.accelerator.type] = totals.get(pool.accelerator.type, 0) + count
    return ",".join(f"{n}x{kind}" for kind, n in totals.items()) or "cpu"


_SUFFIXES = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$")


def quantity_bytes(quantity: int | str) -> int:
    """A memory quantity (``32Gi``, ``512M``, ``1073741824``) in bytes."""
    match = _QUANTITY.match(str(quantity))
    if not match:
        raise ValueError(f"not a memory quantity: {quantity!r}")
    number, suffix = match.groups()
    return int(float(number) * _SUFFIXES[suffix or ""])


def format_bytes(num_bytes: int) -> str:
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        unit = _SUFFIXES[suffix]
        if num_bytes % unit == 0:
            return f"{num_bytes // unit}{suffix}"
    return str(num_bytes)


def shared_memory_size(pool_memory: int | str, shared_memory: int | str | None) -> str:
    """``/dev/shm`` size: the pool's sharedMemory, else half of its memory."""
    if shared_memory is not None:
        return str(shared_memory)
    return format_bytes(quantity_bytes(pool_memory) // 2)


def dump(model: Any) -> dict[str, Any]:
    """A platform model as the camelCase dict the API server expects."""
    return model.model_dump(by_alias=True, exclude_none=True)
