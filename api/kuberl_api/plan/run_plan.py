"""``RunPlan``: everything a run reads, resolved once; JSON in, JSON out."""

from typing import Any

from kuberl_api.plan.reward_judge import JudgePlan
from kuberl_api.plan.rollout_correction import RolloutCorrectionPlan
from kuberl_api.plan.sections import (
    ActorPlan,
    AlgorithmPlan,
    CriticPlan,
    DataPlan,
    Frozen,
    ModelPlan,
    PathsPlan,
    PlacementPlan,
    RefPlan,
    RewardFunctionPlan,
    RewardModelPlan,
    RolloutPlan,
    TrainerPlan,
)
from kuberl_api.plan.version import PLAN_VERSION, check_plan_version


class RunPlan(Frozen):
    placement: PlacementPlan
    paths: PathsPlan
    data: DataPlan
    model: ModelPlan
    actor: ActorPlan
    ref: RefPlan
    rollout: RolloutPlan
    critic: CriticPlan
    reward_model: RewardModelPlan
    reward_function: RewardFunctionPlan
    reward_judge: JudgePlan
    """A generative reward model's judge engine (``plan/reward_judge.py``)."""
    algorithm: AlgorithmPlan
    rollout_correction: RolloutCorrectionPlan
    trainer: TrainerPlan
    source: dict[str, Any]
    """The effective backend_config the plan was built from, for the record (trackers, the
    checkpoint's config.json). Nothing reads settings from it."""
    plan_version: int = PLAN_VERSION
    """The plan's schema (``kuberl_api.plan.version``); ``from_json`` refuses any other."""
    source_digest: str = ""
    """``sha256:`` of the validated document the plan was resolved from, the same for every
    attempt (``plan.version.document_digest``); empty for a plan built by code (tests, benches)."""

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> "RunPlan":
        check_plan_version(text)
        return cls.model_validate_json(text)
