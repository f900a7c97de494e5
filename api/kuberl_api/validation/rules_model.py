"""The model-dependent start refusals (``plan/model_rules.py``), on the models whose
config.json is on this machine (``plan/model_files.py``)."""

from kuberl_api.backend_config import BackendConfig
from kuberl_api.plan.model_files import local_model_facts
from kuberl_api.plan.model_rules import ModelUse, model_refusals
from kuberl_api.validation.problems import Problem, join_path


def model_use_of(cfg: BackendConfig) -> ModelUse:
    arr = cfg.actor_rollout_ref
    return ModelUse(
        actor_path=arr.model.path,
        critic_path=cfg.critic.model.path or arr.model.path,
        critic_enabled=cfg.needs_critic,
        freeze_vision_tower=arr.actor.freeze_vision_tower,
        sp_size=arr.actor.ulysses_sequence_parallel_size,
    )


def check_model(cfg: BackendConfig, bc: str) -> list[Problem]:
    return [
        Problem(join_path(bc, r.key), r.message, r.fix, r.value)
        for r in model_refusals(model_use_of(cfg), local_model_facts)
    ]
