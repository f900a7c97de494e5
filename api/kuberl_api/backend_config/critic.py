"""``critic.*``: the value model used by GAE."""

from typing import Any

from pydantic import Field

from kuberl_api.backend_config.actor import (
    CheckpointConfig,
    FSDPConfig,
    LossAggMode,
    OptimConfig,
    Strategy,
)
from kuberl_api.backend_config.verl_keys import VerlCriticKeys, VerlCriticModelKeys


class CriticModelConfig(VerlCriticModelKeys):
    path: str | None = Field(None, description="Null starts from the actor's model.")
    tokenizer_path: str | None = None
    override_config: dict[str, Any] = Field(default_factory=dict)
    external_lib: str | None = None
    trust_remote_code: bool = False
    enable_gradient_checkpointing: bool = True
    use_remove_padding: bool = False
    fsdp_config: FSDPConfig = Field(default_factory=FSDPConfig)
    lora_rank: int = Field(0, ge=0)
    lora_alpha: int = Field(16, gt=0)
    target_modules: str | list[str] = "all-linear"


class CriticOptimConfig(OptimConfig):
    lr: float = Field(1e-5, gt=0, description="verl's critic default, written or not.")


class CriticConfig(VerlCriticKeys):
    enable: bool | None = Field(None, description="Null enables the critic exactly for GAE.")
    strategy: Strategy = "fsdp"
    optim: CriticOptimConfig = Field(default_factory=CriticOptimConfig)
    model: CriticModelConfig = Field(default_factory=CriticModelConfig)
    ppo_mini_batch_size: int | None = Field(None, gt=0, description="Null follows actor.")
    ppo_micro_batch_size: int | None = Field(
        None, gt=0, description="Deprecated: use ppo_micro_batch_size_per_gpu."
    )
    ppo_micro_batch_size_per_gpu: int | None = Field(None, gt=0)
    forward_micro_batch_size: int | None = Field(None, gt=0, description="Deprecated.")
    forward_micro_batch_size_per_gpu: int | None = Field(None, gt=0)
    use_dynamic_bsz: bool | None = Field(None, description="Null follows actor.")
    ppo_max_token_len_per_gpu: int = Field(32768, gt=0)
    forward_max_token_len_per_gpu: int | None = Field(None, gt=0)
    ulysses_sequence_parallel_size: int = Field(1, gt=0)
    ppo_epochs: int | None = Field(None, gt=0, description="Null follows actor.")
    shuffle: bool | None = None
    grad_clip: float = Field(1.0, gt=0)
    cliprange_value: float = Field(0.5, gt=0)
    loss_agg_mode: LossAggMode | None = Field(None, description="Null follows actor.")
    loss_scale_factor: float | None = Field(
        None, gt=0, description="Null follows actor (verl's seq-mean-token-sum-norm divisor)."
    )
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
