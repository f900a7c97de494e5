"""What the runtime refuses once it sees the model, decided from the model's config.json.

The runtime refuses, when it builds its components: a critic on a vision-language policy (no
value-head class for it), ``freeze_vision_tower`` on a model without a vision tower, and a
Ulysses SP degree the model's attention heads cannot be split by. The same rules run, on the
same facts (``model_files.py``), in two places that come before any rank:

- validation (``validation/rules_model.py``), wherever the model's config.json is on the
  validating machine: a local directory, a ``file://`` URL, a hub id already in the hub cache
  (not in the operator, which validates with ``read_models`` off: a job's paths are on its pods);
- the runtime's driver (``kuberl_runtime/config.py::check_runtime``), before the ranks start,
  which also reads a remote URL's config.json (``kuberl_runtime/trainer/start_checks.py``).
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kuberl_api.plan.model_files import ModelFacts, check_heads
from kuberl_api.plan.run_plan import RunPlan

FactsReader = Callable[[str], ModelFacts | None]
SP_KEY = "actor_rollout_ref.actor.ulysses_sequence_parallel_size"
FREEZE_KEY = "actor_rollout_ref.actor.freeze_vision_tower"


@dataclass(frozen=True)
class ModelUse:
    """How a run uses its models: what the rules check against the models' facts."""

    actor_path: str
    critic_path: str
    critic_enabled: bool
    freeze_vision_tower: bool
    sp_size: int

    @classmethod
    def of_plan(cls, plan: RunPlan) -> "ModelUse":
        return cls(
            actor_path=plan.model.path,
            critic_path=plan.critic.model.path or plan.model.path,
            critic_enabled=plan.critic.enable,
            freeze_vision_tower=plan.actor.freeze_vision_tower,
            sp_size=plan.placement.sp_size,
        )


@dataclass(frozen=True)
class ModelRefusal:
    key: str
    """The config key (dotted, under the backend config) to change."""
    message: str
    fix: str
    value: Any


def model_refusals(use: ModelUse, read: FactsReader) -> list[ModelRefusal]:
    """Every refusal the models' facts call for; a model ``read`` cannot read is not judged."""
    actor = read(use.actor_path)
    refusals: list[ModelRefusal] = []
    if actor is not None:
        refusals += _vision_rules(use, actor)
        refusals += _head_rules(use.sp_size, actor)
    if use.critic_enabled and use.critic_path != use.actor_path:
        critic = read(use.critic_path)
        refusals += _head_rules(use.sp_size, critic) if critic is not None else []
    return refusals


def _vision_rules(use: ModelUse, actor: ModelFacts) -> list[ModelRefusal]:
    kind = f"{actor.model_type or 'a model'} ({actor.source})"
    if actor.vision and use.critic_enabled:
        message = f"a critic on a vision-language policy, {kind}, is not supported yet"
        fix = (
            "there is no value-head class for a VL model: use a critic-free "
            "algorithm.adv_estimator such as grpo or rloo, and set critic.enable: false"
        )
        return [ModelRefusal("critic.enable", message, fix, True)]
    if not actor.vision and use.freeze_vision_tower:
        message = f"the model {kind} is not vision-language: it has no vision tower to freeze"
        return [ModelRefusal(FREEZE_KEY, message, "set it to false", True)]
    return []


def _head_rules(sp_size: int, facts: ModelFacts) -> list[ModelRefusal]:
    heads, kv_heads = facts.num_attention_heads, facts.num_key_value_heads
    if sp_size <= 1 or heads is None or kv_heads is None:
        return []
    why = check_heads(heads, kv_heads, sp_size)
    if why is None:
        return []
    message = f"Ulysses SP splits the attention heads of {facts.source}: {why}"
    fix = "use a divisor of the model's attention heads (and of its KV heads, or a multiple)"
    return [ModelRefusal(SP_KEY, message, fix, sp_size)]
