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


class OverlongBufferConfig(ConfigModel):
    """DAPO's soft overlong punishment, read by the dapo reward manager (verl 0.9.1's
    ``reward_kwargs.overlong_buffer_cfg``): responses longer than max_resp_len − len lose up to
    penalty_factor, linearly."""

    enable: bool = False
    len: int = Field(0, ge=0, description="Tokens before max_resp_len where the penalty starts.")
    penalty_factor: float = Field(1.0, ge=0, description="The penalty at max_resp_len tokens.")
    log: bool = Field(False, description="Record overlong_reward and overlong per response.")


class RewardKwargsConfig(ConfigModel):
    """Keyword arguments of the reward manager, as verl's DAPO recipe writes them."""

    overlong_buffer_cfg: OverlongBufferConfig = Field(default_factory=OverlongBufferConfig)
    max_resp_len: int | None = Field(
        None,
        gt=0,
        description="Needed with the buffer on; verl's recipe: data.max_response_length.",
    )


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
    reward_kwargs: RewardKwargsConfig = Field(default_factory=RewardKwargsConfig)
    launch_reward_fn_async: bool = False


class CustomRewardFunctionConfig(ConfigModel):
    path: str | None = Field(None, description="Python file holding the scoring function.")
    name: str = "compute_score"
    reward_kwargs: dict[str, Any] = Field(default_factory=dict)
