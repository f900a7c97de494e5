"""One plan section from its verl config node alone, for code that drives an engine without a job
(the dry run, engine tests, benchmarks).

Each node is validated by the config models (verl's defaults fill what it leaves out) and resolved
by the same function ``build_run_plan`` uses, so a section made here equals the one a job with the
same keys gets. Keys a node inherits from elsewhere in a job (the critic's batch sizes from the
actor, the rollout's lengths from ``data``) must be written in the node or passed here.
"""

from typing import Any

from kuberl_api.backend_config.actor import ActorConfig, FSDPConfig, OptimConfig
from kuberl_api.backend_config.critic import CriticConfig
from kuberl_api.backend_config.rollout import RolloutConfig
from kuberl_api.plan.build import (
    actor_section,
    critic_section,
    rollout_section,
)
from kuberl_api.plan.common import fsdp_section, optim_section
from kuberl_api.plan.sections import ActorPlan, CriticPlan, FSDPPlan, OptimPlan, RolloutPlan

Node = dict[str, Any] | None


def actor_plan(node: Node = None, *, rollout_n: int = 1, dp_size: int = 1) -> ActorPlan:
    """`actor_rollout_ref.actor`; `rollout_n` and `dp_size` size its per-rank mini-batch."""
    return actor_section(ActorConfig.model_validate(node or {}), rollout_n, dp_size)


def critic_plan(node: Node = None, *, actor_model_path: str = "") -> CriticPlan:
    """`critic`, with ppo_mini_batch_size, ppo_epochs and loss_agg_mode written in the node."""
    return critic_section(CriticConfig.model_validate(node or {}), actor_model_path)


def rollout_plan(
    node: Node = None, *, max_prompt_length: int = 512, max_response_length: int = 512
) -> RolloutPlan:
    """`actor_rollout_ref.rollout`; the lengths stand for `data.max_*_length` (verl's 512)."""
    cfg = RolloutConfig.model_validate(node or {})
    return rollout_section(cfg, max_prompt_length, max_response_length)


def fsdp_plan(node: Node = None) -> FSDPPlan:
    """A role's `fsdp_config`."""
    return fsdp_section(FSDPConfig.model_validate(node or {}))


def optim_plan(node: Node = None) -> OptimPlan:
    """A role's `optim`."""
    return optim_section(OptimConfig.model_validate(node or {}))
