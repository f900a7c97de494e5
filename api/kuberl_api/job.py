"""The ``RLTrainingJob`` resource: spec (what to train, where) and status (what happened)."""

from typing import Any, Literal

from pydantic import ConfigDict, Field

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.base import ConfigModel, PlatformModel
from kuberl_api.platform import (
    EnvVar,
    HeadSpec,
    LocalObjectReference,
    RunPolicy,
    SchedulingSpec,
    StorageSpec,
    WorkerPool,
)

GROUP = "kuberl.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "RLTrainingJob"
PLURAL = "rltrainingjobs"
SHORT_NAME = "rlj"


OUTPUT_DIR_PATTERN = r"^(/|[A-Za-z][A-Za-z0-9+.-]*://)"
"""af_output_dir: an absolute path or a URL (its scheme is checked at validation,
``validation/rules_storage.py``)."""


class EngineKwargs(ConfigModel):
    """ModelArts' ``engine_kwargs``: keyword arguments for the rollout engine."""

    vllm: dict[str, Any] = Field(
        default_factory=dict, description="e.g. disable_mm_preprocessor_cache"
    )


class JobDependency(PlatformModel):
    """Another RLTrainingJob of the same namespace that must succeed first."""

    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        description="Name of the RLTrainingJob to wait for.",
    )


class RLTrainingJobSpec(PlatformModel):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "[has(self.backend_config), has(self.roll_config), "
                    "has(self.sft_config)].exists_one(x, x)",
                    "message": "set exactly one of backend_config, roll_config and sft_config",
                }
            ]
        }
    )

    # ModelArts keeps these names exactly, so a ModelArts YAML pastes under spec unchanged.
    af_output_dir: str = Field(
        alias="af_output_dir",
        min_length=2,
        pattern=OUTPUT_DIR_PATTERN,
        description="The output root (checkpoints, logs, merged model): an absolute path (a "
        "mounted volume, spec.storage.output), or a URL (s3://, obs://, gs://, hdfs://, file://) "
        "the ranks upload to from a local staging directory.",
    )
    backend_config: BackendConfig | None = Field(
        None,
        alias="backend_config",
        description="The verl PPO/GRPO config tree; exactly one of backend_config, roll_config "
        "and sft_config.",
    )
    roll_config: dict[str, Any] | None = Field(
        None,
        alias="roll_config",
        description="A ROLL pipeline config (actor_train, actor_infer, ...), translated into "
        "backend_config when the job is validated; see docs/roll.md.",
    )
    sft_config: SFTConfig | None = Field(
        None,
        alias="sft_config",
        description="verl 0.9.1's SFT trainer config (data, model, engine, optim, checkpoint, "
        "trainer), as `python -m verl.trainer.sft_trainer` reads it: the job runs supervised "
        "fine-tuning instead of RL; see docs/sft.md.",
    )
    engine_kwargs: EngineKwargs = Field(default_factory=EngineKwargs, alias="engine_kwargs")
    image: str | None = Field(None, description="Training image; null uses the operator default.")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list, max_length=64)
    head: HeadSpec = Field(default_factory=HeadSpec)
    worker_pools: list[WorkerPool] = Field(min_length=1, max_length=16)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    scheduling: SchedulingSpec = Field(default_factory=SchedulingSpec)
    depends_on: list[JobDependency] = Field(
        default_factory=list,
        max_length=16,
        description="Jobs (same namespace) that must succeed before this one starts, e.g. the "
        "SFT job whose af_output_dir/huggingface this job's model.path reads. Until then the job "
        "stays Pending (condition WaitingForDependency); it fails if one of them fails.",
    )
    network: Literal["pod", "hostNetwork"] = Field(
        "pod",
        description="pod: Ray pods on the pod network (default). hostNetwork: Ray pods share "
        "their node's network (NCCL over RDMA/RoCE on bare metal; nodes without a pod CNI); the "
        "operator then gives each RayCluster its own Ray ports, binds Ray to the node's address "
        "and reaches the dashboard at the head pod's host IP. Pods need a namespace whose Pod "
        "Security level admits host networking (privileged).",
    )

    @property
    def training_config(self) -> BackendConfig | SFTConfig:
        """What the job trains from: its backend_config, or its sft_config for an SFT job."""
        config = self.sft_config or self.backend_config
        assert config is not None, "validation admits a spec only with one of them"
        return config

    @property
    def training_config_key(self) -> str:
        return "sft_config" if self.sft_config is not None else "backend_config"


Phase = Literal[
    "Pending", "Provisioning", "Running", "Restarting", "Suspended", "Succeeded", "Failed"
]


class Condition(PlatformModel):
    """Shaped like metav1.Condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    last_transition_time: str
    observed_generation: int | None = None


class Attempt(PlatformModel):
    index: int
    submission_id: str
    ray_cluster: str | None = None
    start_time: str | None = None
    end_time: str | None = None
    result: Literal["Running", "Succeeded", "Failed", "Stopped"] | None = None
    reason: str | None = None
    message: str | None = None
    resumed_from_step: int | None = None
    last_step: int | None = Field(None, description="Last global step reported in this attempt.")
    failure_class: Literal["config", "infra", "app"] | None = None


class Progress(PlatformModel):
    global_step: int = 0
    total_steps: int | None = None
    percent: int | None = None
    epoch: int | None = None
    estimated_remaining_seconds: int | None = None
    last_update_time: str | None = None
    metrics: dict[str, float] = Field(default_factory=dict)


class CheckpointStatus(PlatformModel):
    latest_step: int | None = None
    latest_path: str | None = None
    last_saved_time: str | None = None


class RayClusterStatus(PlatformModel):
    name: str | None = None
    state: str | None = None
    dashboard_url: str | None = Field(None, alias="dashboardURL")
    ray_ports: dict[str, int] | None = Field(
        None, description="hostNetwork only: the Ray ports allocated to this RayCluster."
    )
    ready_workers: int | None = None
    desired_workers: int | None = None


class RayJobStatus(PlatformModel):
    submission_id: str | None = None
    status: str | None = None
    message: str | None = None
    session_name: str | None = None
    start_time: str | None = None
    end_time: str | None = None


class RLTrainingJobStatus(PlatformModel):
    phase: Phase | None = None
    message: str | None = None
    observed_generation: int | None = None
    conditions: list[Condition] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    restarts: int = 0
    progress: Progress | None = None
    checkpoint: CheckpointStatus | None = None
    ray_cluster: RayClusterStatus | None = None
    ray_job: RayJobStatus | None = None
    accelerators: str | None = Field(None, description="Summary such as 16xnvidia.com/gpu.")
    start_time: str | None = None
    completion_time: str | None = None
    next_retry_time: str | None = None


class ModelArtsConfig(ConfigModel):
    """The ModelArts/AscendFactory envelope on its own, before placement is added."""

    af_output_dir: str = Field(min_length=2, pattern=OUTPUT_DIR_PATTERN)
    backend_config: BackendConfig
    engine_kwargs: EngineKwargs = Field(default_factory=EngineKwargs)


class RLTrainingJob(PlatformModel):
    api_version: Literal["kuberl.io/v1alpha1"] = API_VERSION
    kind: Literal["RLTrainingJob"] = KIND
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: RLTrainingJobSpec
    status: RLTrainingJobStatus | None = None
