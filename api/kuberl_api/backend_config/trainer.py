"""``trainer.*``: length of the run, placement, logging, validation and checkpoints."""

from typing import Literal

from pydantic import Field

from kuberl_api.accelerators import DeviceType
from kuberl_api.backend_config.verl_keys import VerlTrainerKeys

LoggerName = Literal[
    "console", "tensorboard", "wandb", "mlflow", "swanlab", "file", "tracking", "clearml"
]


class TrainerConfig(VerlTrainerKeys):
    balance_batch: bool = True
    total_epochs: int = Field(30, gt=0)
    total_training_steps: int | None = Field(
        None, gt=0, description="Overrides epochs x steps per epoch."
    )
    project_name: str = "verl_examples"
    experiment_name: str = "gsm8k"
    logger: LoggerName | list[LoggerName] = Field(
        default_factory=lambda: ["console"],
        description="Trackers: console, tensorboard, file (logs/metrics.jsonl, always written), "
        "wandb, mlflow, swanlab (refused before the run when not installed).",
    )
    log_val_generations: int = Field(0, ge=0)
    rollout_data_dir: str | None = None
    validation_data_dir: str | None = None
    nnodes: int | None = Field(None, gt=0, description="Null derives it from the worker pools.")
    n_gpus_per_node: int | None = Field(
        None, gt=0, description="Null derives it from the worker pools."
    )
    device: DeviceType | None = Field(
        None, description="Null derives it from the accelerator type."
    )
    save_freq: int = Field(-1, description="Save every N steps (and at the end) when > 0.")
    test_freq: int = Field(-1, description="Validate every N steps (and at the end) when > 0.")
    val_before_train: bool = True
    val_only: bool = False
    critic_warmup: int = Field(0, ge=0)
    resume_mode: Literal["auto", "disable", "resume_path"] = "auto"
    resume_from_path: str | None = None
    default_local_dir: str | None = Field(
        None, description="Checkpoint root; a job puts it under af_output_dir/checkpoints."
    )
    default_hdfs_dir: str | None = None
    del_local_ckpt_after_load: bool = False
    max_actor_ckpt_to_keep: int | None = Field(None, gt=0)
    max_critic_ckpt_to_keep: int | None = Field(None, gt=0)
    remove_previous_ckpt_in_save: bool | None = Field(
        None, description="Deprecated: use max_actor_ckpt_to_keep=1."
    )
    seed: int = 42
    use_legacy_worker_impl: Literal["auto", "enable", "disable"] = "auto"

    @property
    def loggers(self) -> list[str]:
        return [self.logger] if isinstance(self.logger, str) else list(self.logger)
