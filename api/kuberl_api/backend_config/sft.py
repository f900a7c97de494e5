"""verl 0.9.1's SFT trainer config (``verl/trainer/config/sft_trainer_engine.yaml``), as written.

The tree verl composes for ``verl.trainer.sft_trainer``: ``data``, ``model`` (the same
``HFModelConfig`` as the actor's), ``engine`` (the same FSDP engine config as the actor's
``fsdp_config``), ``optim`` (the actor's optimizer config), ``checkpoint``, ``trainer`` and a
``profiler`` subtree. Reusing the RL models keeps one meaning per key: ``model.lora_rank`` is the
same knob in both trees. What each key does in kuberl is in ``kuberl_api/keys/sft.py``.
"""

from typing import Any, Literal

from pydantic import Field

from kuberl_api.accelerators import DeviceType
from kuberl_api.backend_config.actor import CheckpointConfig, FSDPConfig, OptimConfig
from kuberl_api.backend_config.data import CustomClassConfig
from kuberl_api.backend_config.model import ModelConfig
from kuberl_api.backend_config.trainer import LoggerName
from kuberl_api.base import ConfigModel

SFT_TOP_LEVEL_KEYS = frozenset(
    {"data", "model", "engine", "optim", "checkpoint", "trainer", "profiler"}
)


class SFTDataConfig(ConfigModel):
    train_batch_size: int = Field(256, gt=0, le=10_000_000, description="Global batch size.")
    micro_batch_size_per_gpu: int = Field(4, gt=0, description="Also the validation batch.")
    max_token_len_per_gpu: int = Field(8192, gt=0, description="Token budget (use_dynamic_bsz).")
    use_dynamic_bsz: bool = True
    train_files: str | list[str] = Field(description="Parquet/JSON/JSONL/CSV conversation files.")
    val_files: str | list[str] | None = Field(None, description="Null: no validation loss.")
    train_max_samples: int = Field(-1, description="> 0 keeps only this many rows.")
    val_max_samples: int = -1
    messages_key: str = Field("messages", description="Column holding the chat messages.")
    tools_key: str = "tools"
    enable_thinking_key: str = "enable_thinking"
    enable_thinking_default: bool | str | None = "none"
    pad_mode: Literal["no_padding", "right"] = "no_padding"
    max_length: int = Field(1024, gt=0, le=1_048_576, description="Tokens kept per conversation.")
    truncation: Literal["error", "left", "right"] = "error"
    balance_dp_token: bool = False
    custom_cls: CustomClassConfig = Field(default_factory=CustomClassConfig)
    use_shm: bool = False
    apply_chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    num_workers: int = Field(8, ge=0)
    ignore_input_ids_mismatch: bool = False


class SFTOptimConfig(OptimConfig):
    lr: float = Field(1e-3, gt=0, description="verl's optim/fsdp.yaml default.")


class SFTTrainerConfig(ConfigModel):
    default_local_dir: str | None = Field(
        None, description="Checkpoint root; a job puts it under af_output_dir/checkpoints."
    )
    default_hdfs_dir: str | None = None
    project_name: str = "gsm8k-sft"
    experiment_name: str = "test"
    total_epochs: int = Field(4, gt=0)
    total_training_steps: int | None = Field(
        None, gt=0, description="Overrides epochs x steps per epoch."
    )
    logger: LoggerName | list[LoggerName] = Field(default_factory=lambda: ["console"])
    seed: int = 1
    save_freq: int = Field(-1, description="Save every N steps (and at the end) when > 0.")
    test_freq: int = Field(-1, description="Validation loss every N steps (and at the end).")
    max_ckpt_to_keep: int | None = Field(None, gt=0)
    balance_batch: bool = True
    resume_mode: Literal["auto", "disable", "resume_path"] = "auto"
    resume_from_path: str | None = None
    device: DeviceType | None = Field(
        None, description="Null derives it from the accelerator type."
    )
    nnodes: int | None = Field(None, gt=0, description="Null derives it from the worker pools.")
    n_gpus_per_node: int | None = Field(None, gt=0)
    profile_interval: list[int] = Field(default_factory=lambda: [-1, -1])

    @property
    def loggers(self) -> list[str]:
        return [self.logger] if isinstance(self.logger, str) else list(self.logger)


class SFTConfig(ConfigModel):
    """The whole SFT tree; ``model.path`` and ``data.train_files`` have no usable default."""

    data: SFTDataConfig
    model: ModelConfig
    engine: FSDPConfig = Field(default_factory=FSDPConfig)
    optim: SFTOptimConfig = Field(default_factory=SFTOptimConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    trainer: SFTTrainerConfig = Field(default_factory=SFTTrainerConfig)
    profiler: dict[str, Any] | None = None


def looks_like_sft(tree: Any) -> bool:
    """A verl tree is an SFT config when it has the SFT trainer's top-level ``model`` node and
    none of the PPO trainer's (``actor_rollout_ref``): verl's PPO tree never has a top-level
    ``model``, its SFT tree never has ``actor_rollout_ref``."""
    return isinstance(tree, dict) and "model" in tree and "actor_rollout_ref" not in tree
