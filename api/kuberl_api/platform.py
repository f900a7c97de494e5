"""Where a job runs: image, head, worker pools, storage, run policy and scheduling."""

from typing import Any, Literal

from pydantic import Field, model_validator

from kuberl_api.accelerators import AcceleratorType
from kuberl_api.base import PlatformModel

Quantity = int | str


class Toleration(PlatformModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class LocalObjectReference(PlatformModel):
    name: str = Field(min_length=1)


class EnvVar(PlatformModel):
    name: str = Field(min_length=1)
    value: str | None = None
    value_from: dict[str, Any] | None = Field(
        None, description="A Kubernetes EnvVarSource (secretKeyRef, configMapKeyRef, ...)."
    )


class Accelerator(PlatformModel):
    type: AcceleratorType = Field(description="Device-plugin resource name, or none.")
    per_node: int = Field(0, ge=0, le=64, description="Accelerators per pod (one pod per node).")


class HeadSpec(PlatformModel):
    cpu: Quantity = "2"
    memory: Quantity = "8Gi"
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)


class WorkerPool(PlatformModel):
    name: str = Field(
        min_length=1,
        max_length=40,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="Lowercase letters, digits and '-', as in a DNS label.",
    )
    accelerator: Accelerator = Field(default_factory=lambda: Accelerator(type="none"))
    nodes: int = Field(1, ge=1, le=1024, description="Pods in this pool, one per node.")
    cpu: Quantity = "8"
    memory: Quantity = "32Gi"
    shared_memory: Quantity | None = Field(
        None, description="Size of /dev/shm; null uses half of memory."
    )
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    affinity: dict[str, Any] | None = Field(None, description="A Kubernetes Affinity.")
    scheduler_name: str | None = Field(None, description="e.g. volcano for Ascend pools.")


class VolumeSource(PlatformModel):
    claim_name: str | None = Field(None, description="PersistentVolumeClaim to mount.")
    host_path: str | None = Field(None, description="Host directory (single-node and tests).")
    read_only: bool = False


class ModelVolume(VolumeSource):
    mount_path: str = Field(pattern=r"^/", description="Where the model directory is mounted.")


class StorageCredentials(PlatformModel):
    secret_ref: LocalObjectReference = Field(
        description="Secret (same namespace) whose keys become the ranks' environment variables: "
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION for s3:// and "
        "obs://; see docs/storage.md. Its values never enter the spec, status, logs or events."
    )


class StorageSpec(PlatformModel):
    output: VolumeSource | None = Field(
        None, description="Volume holding af_output_dir, mounted at it on every pod."
    )
    model: ModelVolume | None = Field(None, description="Optional read-only model volume.")
    credentials: StorageCredentials | None = Field(
        None, description="Credentials for the remote (s3://, gs://, obs://) paths of the job."
    )


class RunPolicy(PlatformModel):
    backoff_limit: int = Field(3, ge=0, le=100, description="Failed attempts retried.")
    active_deadline_seconds: int | None = Field(None, gt=0)
    ttl_seconds_after_finished: int | None = Field(None, ge=0)
    cleanup_policy: Literal["DeleteCluster", "KeepOnFailure", "KeepAll"] = "DeleteCluster"
    suspend: bool = False
    pre_running_deadline_seconds: int | None = Field(
        None,
        gt=0,
        description="Seconds an attempt may take from its start (or its Kueue admission) until "
        "the Ray job runs; past it the attempt fails with PreRunningDeadlineExceeded.",
    )
    progress_deadline_seconds: int | None = Field(
        None,
        ge=0,
        description="Seconds without a progress heartbeat before a running attempt is stopped "
        "and retried from its checkpoint (reason NoProgress). Unset: 10x the observed median "
        "step time, at least the operator's floor (15 min). 0 turns hang detection off.",
    )


class SchedulingSpec(PlatformModel):
    queue_name: str | None = Field(None, description="Kueue LocalQueue.")
    priority_class_name: str | None = None
    workload_priority_class: str | None = Field(
        None,
        description="Kueue WorkloadPriorityClass (label kueue.x-k8s.io/priority-class); "
        "needs queueName.",
    )

    @model_validator(mode="after")
    def _priority_needs_queue(self) -> "SchedulingSpec":
        if self.workload_priority_class and not self.queue_name:
            raise ValueError(
                "workloadPriorityClass is read by Kueue only on queued jobs: "
                "set spec.scheduling.queueName too, or drop workloadPriorityClass"
            )
        return self
