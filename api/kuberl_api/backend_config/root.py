"""The whole ``backend_config`` tree and verl's "this key follows that one" defaults."""

from typing import Any, Self

from pydantic import Field, model_validator

from kuberl_api.backend_config.actor import ActorConfig
from kuberl_api.backend_config.algorithm import AlgorithmConfig
from kuberl_api.backend_config.critic import CriticConfig
from kuberl_api.backend_config.data import DataConfig
from kuberl_api.backend_config.model import ModelConfig
from kuberl_api.backend_config.ref import RefConfig
from kuberl_api.backend_config.reward import CustomRewardFunctionConfig, RewardModelConfig
from kuberl_api.backend_config.rollout import RolloutConfig
from kuberl_api.backend_config.trainer import TrainerConfig
from kuberl_api.backend_config.verl_keys import VerlRootKeys
from kuberl_api.base import ConfigModel


class ActorRolloutRefConfig(ConfigModel):
    hybrid_engine: bool = Field(True, description="Actor, rollout and reference share devices.")
    nccl_timeout: int = Field(600, gt=0, description="Collective timeout in seconds.")
    model: ModelConfig
    actor: ActorConfig = Field(default_factory=ActorConfig)
    ref: RefConfig = Field(default_factory=RefConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)


class BackendConfig(VerlRootKeys):
    data: DataConfig
    actor_rollout_ref: ActorRolloutRefConfig
    critic: CriticConfig = Field(default_factory=CriticConfig)
    reward_model: RewardModelConfig = Field(default_factory=RewardModelConfig)
    custom_reward_function: CustomRewardFunctionConfig = Field(
        default_factory=CustomRewardFunctionConfig
    )
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    ray_kwargs: dict[str, Any] = Field(default_factory=dict, description="Passed to ray.init.")

    @model_validator(mode="after")
    def _inherit_defaults(self) -> Self:
        """Fill every null that verl's YAML defines as ``${another.key}``."""
        _inherit_actor_rollout_ref(self)
        _inherit_critic(self)
        model = self.actor_rollout_ref.model
        self.data.tokenizer = self.data.tokenizer or model.tokenizer_path or model.path
        if self.data.seed is None:
            self.data.seed = self.trainer.seed
        if self.reward_model.model.input_tokenizer is None:
            self.reward_model.model.input_tokenizer = model.path
        if self.trainer.default_local_dir is None:
            trainer = self.trainer
            trainer.default_local_dir = (
                f"checkpoints/{trainer.project_name}/{trainer.experiment_name}"
            )
        return self

    @property
    def needs_reference(self) -> bool:
        return self.algorithm.use_kl_in_reward or self.actor_rollout_ref.actor.use_kl_loss

    @property
    def needs_critic(self) -> bool:
        return bool(self.critic.enable)


def _inherit_actor_rollout_ref(cfg: BackendConfig) -> None:
    arr = cfg.actor_rollout_ref
    actor, ref, rollout = arr.actor, arr.ref, arr.rollout
    _fill(actor, use_remove_padding=arr.model.use_remove_padding)
    _fill(actor, use_fused_kernels=arr.model.use_fused_kernels)
    _fill(actor.checkpoint, load_contents=list(actor.checkpoint.save_contents))
    _fill(rollout, prompt_length=cfg.data.max_prompt_length)
    _fill(rollout, response_length=cfg.data.max_response_length)
    _fill(rollout, log_prob_use_dynamic_bsz=actor.use_dynamic_bsz)
    _fill(rollout, log_prob_max_token_len_per_gpu=actor.ppo_max_token_len_per_gpu)
    _fill(ref, strategy=actor.strategy)
    _fill(ref, log_prob_use_dynamic_bsz=actor.use_dynamic_bsz)
    _fill(ref, log_prob_max_token_len_per_gpu=actor.ppo_max_token_len_per_gpu)
    _fill(ref, ulysses_sequence_parallel_size=actor.ulysses_sequence_parallel_size)
    _fill(ref, use_torch_compile=actor.use_torch_compile)


def _inherit_critic(cfg: BackendConfig) -> None:
    actor, critic = cfg.actor_rollout_ref.actor, cfg.critic
    model_path = cfg.actor_rollout_ref.model.path
    _fill(critic, enable=cfg.algorithm.adv_estimator == "gae")
    _fill(critic.model, path=model_path)
    _fill(critic.model, tokenizer_path=model_path)
    _fill(critic, ppo_mini_batch_size=actor.ppo_mini_batch_size)
    _fill(critic, use_dynamic_bsz=actor.use_dynamic_bsz)
    _fill(critic, forward_max_token_len_per_gpu=critic.ppo_max_token_len_per_gpu)
    _fill(critic, ppo_epochs=actor.ppo_epochs)
    _fill(critic, shuffle=actor.shuffle)
    _fill(critic, loss_agg_mode=actor.loss_agg_mode)
    _fill(critic, loss_scale_factor=actor.loss_scale_factor)


def _fill(node: ConfigModel, **defaults: Any) -> None:
    for key, value in defaults.items():
        if getattr(node, key) is None:
            setattr(node, key, value)
