"""``reward_model.*`` and ``custom_reward_function.*``: where scores come from."""

from typing import Any

from pydantic import Field

from kuberl_api.backend_config.actor import FSDPConfig, Strategy
from kuberl_api.backend_config.verl_keys import VerlRewardModelKeys
from kuberl_api.base import ConfigModel


class RewardModelModelConfig(ConfigModel):
    path: str | None = Field(None, description="Sequence-classification reward model directory.")
    input_tokenizer: str | None = Field(None, description="Null uses the actor's tokenizer.")
    external_lib: str | None = None
    trust_remote_code: bool = False
    use_remove_padding: bool = False
    fsdp_config: FSDPConfig = Field(default_factory=lambda: FSDPConfig(forward_only=True))


class RewardModelConfig(VerlRewardModelKeys):
    enable: bool = False
    strategy: Strategy = "fsdp"
    model: RewardModelModelConfig = Field(default_factory=RewardModelModelConfig)
    micro_batch_size: int | None = Field(
        None, gt=0, description="Deprecated: use micro_batch_size_per_gpu."
    )
    micro_batch_size_per_gpu: int | None = Field(None, gt=0)
    max_length: int | None = Field(None, gt=0)
    use_dynamic_bsz: bool = False
    forward_max_token_len_per_gpu: int | None = Field(None, gt=0)
    reward_manager: str = Field("naive", description="naive, batch, dapo or prime.")
    launch_reward_fn_async: bool = False


class CustomRewardFunctionConfig(ConfigModel):
    path: str | None = Field(None, description="Python file holding the scoring function.")
    name: str = "compute_score"
    reward_kwargs: dict[str, Any] = Field(default_factory=dict)
