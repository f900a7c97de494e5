"""``algorithm.*``: advantage estimator and in-reward KL."""

from typing import Literal

from pydantic import Field

from kuberl_api.backend_config.actor import KLEstimator
from kuberl_api.backend_config.verl_keys import VerlAlgorithmKeys
from kuberl_api.base import ConfigModel

AdvantageEstimator = Literal[
    "gae",
    "grpo",
    "rloo",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "remax",
    "opo",
    "grpo_passk",
    "gpg",
]


class KLControlConfig(ConfigModel):
    type: Literal["fixed", "adaptive"] = "fixed"
    kl_coef: float = Field(0.001, ge=0)
    horizon: int = Field(10000, gt=0)
    target_kl: float = Field(0.1, gt=0)


class PFPPOConfig(ConfigModel):
    reweight_method: Literal["pow", "max_min", "max_random"] = "pow"
    weight_pow: float = 2.0


class AlgorithmConfig(VerlAlgorithmKeys):
    gamma: float = Field(1.0, ge=0, le=1)
    lam: float = Field(1.0, ge=0, le=1)
    adv_estimator: AdvantageEstimator = "gae"
    norm_adv_by_std_in_grpo: bool = True
    use_kl_in_reward: bool = False
    kl_penalty: KLEstimator = "kl"
    kl_ctrl: KLControlConfig = Field(default_factory=KLControlConfig)
    use_pf_ppo: bool = False
    pf_ppo: PFPPOConfig = Field(default_factory=PFPPOConfig)
