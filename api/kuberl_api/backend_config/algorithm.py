"""``algorithm.*``: advantage estimator and in-reward KL."""

from typing import Literal

from pydantic import Field, model_validator

from kuberl_api.backend_config.actor import KLEstimator
from kuberl_api.backend_config.rollout_correction import RolloutCorrectionConfig
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


RollNormType = Literal["batch", "group"]
# The estimators ROLL's adv_estimator maps to (gae, grpo, reinforce → reinforce_plus_plus).
ROLL_ESTIMATORS = ("gae", "grpo", "reinforce_plus_plus")


class KLControlConfig(ConfigModel):
    type: Literal["fixed", "adaptive"] = "fixed"
    kl_coef: float = Field(0.001, ge=0)
    horizon: int = Field(10000, gt=0)
    target_kl: float = Field(0.1, gt=0)


class PFPPOConfig(ConfigModel):
    reweight_method: Literal["pow", "max_min", "max_random"] = "pow"
    weight_pow: float = 2.0


class FilterGroupsConfig(ConfigModel):
    """DAPO dynamic sampling (verl's ``algorithm.filter_groups``, verl 0.9 docs/algo/dapo.md)."""

    enable: bool = False
    metric: str | None = Field(
        "reward",
        description="reward | seq_reward | seq_final_reward (summed scores) or a key of the "
        "reward function's extra info (acc, score, ...); a group whose values are all equal "
        "is dropped. verl 0.9.1's default: reward; null with enable is refused, as verl does.",
    )
    max_num_gen_batches: int = Field(
        0, description="Generation batches a step may use before it fails; 0 or less: no limit."
    )
    max_inflight_gen_batches: int = Field(
        1, gt=0, description="verl's V1 async generation bound; kuberl generates one at a time."
    )


class AlgorithmConfig(ConfigModel):
    gamma: float = Field(1.0, ge=0, le=1)
    lam: float = Field(1.0, ge=0, le=1)
    adv_estimator: AdvantageEstimator = "gae"
    norm_adv_by_std_in_grpo: bool = True
    use_kl_in_reward: bool = False
    kl_penalty: KLEstimator = "kl"
    kl_ctrl: KLControlConfig = Field(default_factory=KLControlConfig)
    use_pf_ppo: bool = False
    pf_ppo: PFPPOConfig = Field(default_factory=PFPPOConfig)
    rollout_correction: RolloutCorrectionConfig = Field(default_factory=RolloutCorrectionConfig)
    filter_groups: FilterGroupsConfig = Field(default_factory=FilterGroupsConfig)

    # ---- kuberl extension: ROLL's RLVR options (issue 14; owner H-numbers) -------------------
    # Not verl keys; all off by default. A ROLL pipeline config maps onto them (api/roll/), and
    # kuberl_runtime.algorithms.roll_rlvr implements them with ROLL's semantics (docs/roll.md).
    reward_clip: float | None = Field(
        None, gt=0, description="Clip response- and token-level rewards to ±value (ROLL)."
    )
    advantage_clip: float | None = Field(
        None, gt=0, description="Clip advantages to ±value (ROLL)."
    )
    norm_mean_type: RollNormType | None = Field(
        None, description="Subtract the batch or group mean from each score (ROLL); null: none."
    )
    norm_std_type: RollNormType | None = Field(
        None, description="Divide each score by the batch or group std + 1e-6 (ROLL); null: none."
    )
    max_len_mask: bool = Field(
        False, description="Leave truncated responses out of the advantage and loss (ROLL)."
    )
    difficulty_mask: bool = Field(
        False, description="Leave out prompts whose mean score is outside the thresholds (ROLL)."
    )
    difficulty_low_threshold: float = Field(0.0, description="Kept: mean score > this.")
    difficulty_high_threshold: float = Field(1.0, description="Kept: mean score < this.")

    @model_validator(mode="after")
    def _roll_options_fit(self) -> "AlgorithmConfig":
        settings = {
            "reward_clip": self.reward_clip,
            "advantage_clip": self.advantage_clip,
            "norm_mean_type": self.norm_mean_type,
            "norm_std_type": self.norm_std_type,
            "max_len_mask": self.max_len_mask or None,
            "difficulty_mask": self.difficulty_mask or None,
        }
        used = [key for key, value in settings.items() if value is not None]
        if used and self.adv_estimator not in ROLL_ESTIMATORS:
            raise ValueError(
                f"{', '.join(used)} (ROLL options) work with adv_estimator "
                f"{' | '.join(ROLL_ESTIMATORS)}, not {self.adv_estimator!r}; pick one of those "
                "or remove them"
            )
        if self.difficulty_low_threshold >= self.difficulty_high_threshold:
            raise ValueError(
                f"difficulty_low_threshold ({self.difficulty_low_threshold}) must be below "
                f"difficulty_high_threshold ({self.difficulty_high_threshold})"
            )
        return self

    # ---- end of the ROLL block -----------------------------------------------------------------
