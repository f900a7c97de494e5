"""``RunPlan``: everything a run reads, resolved once; JSON in, JSON out."""

from typing import Any

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
    algorithm: AlgorithmPlan
    trainer: TrainerPlan
    source: dict[str, Any]
    """The effective backend_config the plan was built from, for the record (trackers, the
    checkpoint's config.json). Nothing reads settings from it."""

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> "RunPlan":
        return cls.model_validate_json(text)
