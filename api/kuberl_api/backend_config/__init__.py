"""verl's ``backend_config`` tree as typed models, with verl's defaults and key names."""

from kuberl_api.backend_config.actor import (
    ActorConfig,
    CheckpointConfig,
    FSDPConfig,
    OptimConfig,
    PolicyLossConfig,
)
from kuberl_api.backend_config.algorithm import AlgorithmConfig, KLControlConfig
from kuberl_api.backend_config.critic import CriticConfig, CriticModelConfig
from kuberl_api.backend_config.data import DataConfig
from kuberl_api.backend_config.model import ModelConfig
from kuberl_api.backend_config.ref import RefConfig
from kuberl_api.backend_config.reward import (
    CustomRewardFunctionConfig,
    RewardModelConfig,
)
from kuberl_api.backend_config.rollout import RolloutConfig, ValKwargsConfig
from kuberl_api.backend_config.root import ActorRolloutRefConfig, BackendConfig
from kuberl_api.backend_config.trainer import TrainerConfig

__all__ = [
    "ActorConfig",
    "ActorRolloutRefConfig",
    "AlgorithmConfig",
    "BackendConfig",
    "CheckpointConfig",
    "CriticConfig",
    "CriticModelConfig",
    "CustomRewardFunctionConfig",
    "DataConfig",
    "FSDPConfig",
    "KLControlConfig",
    "ModelConfig",
    "OptimConfig",
    "PolicyLossConfig",
    "RefConfig",
    "RewardModelConfig",
    "RolloutConfig",
    "TrainerConfig",
    "ValKwargsConfig",
]
