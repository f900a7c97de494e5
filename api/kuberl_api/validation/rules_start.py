"""What the runtime would refuse at start from the config alone, refused here first.

Each rule mirrors one refusal the runtime makes when it builds its components (the runtime keeps
its own check for callers that skip validation); ``tests/runtime/test_start_refusals.py`` holds the
two side by side, so a job that validates is never refused at start for the same reason.
"""

from typing import Any

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.model import ModelConfig
from kuberl_api.plan.sections import BUILTIN_REWARD_KWARGS
from kuberl_api.validation.problems import Problem, join_path
from kuberl_api.validation.rules_model import check_model


def check_lora_adapter(model: ModelConfig, path: str) -> list[Problem]:
    """A LoRA adapter to load needs LoRA on: its rank says which adapter shapes to build."""
    if not model.lora_adapter_path or model.lora_rank > 0:
        return []
    fix = "set lora_rank and lora_alpha to the adapter's r and lora_alpha, or drop the path"
    message = "needs model.lora_rank > 0 (LoRA is off)"
    return [Problem(join_path(path, "lora_adapter_path"), message, fix, model.lora_adapter_path)]


def check_builtin_reward_kwargs(
    function_path: str | None, reward_kwargs: dict[str, Any], path: str
) -> list[Problem]:
    """Without a custom function the built-in scorers run; they take only their own option."""
    if function_path:
        return []
    kwargs_path = join_path(path, "reward_kwargs")
    unknown = sorted(set(reward_kwargs) - set(BUILTIN_REWARD_KWARGS))
    problems = []
    if unknown:
        problems.append(
            Problem(
                kwargs_path,
                f"the built-in scorers accept only {list(BUILTIN_REWARD_KWARGS)}",
                "remove the others, or set custom_reward_function.path to a function that "
                "takes them",
                unknown,
            )
        )
    lenient = reward_kwargs.get("lenient", False)
    if not isinstance(lenient, bool):
        fix = "set it to true or false"
        problems.append(Problem(join_path(kwargs_path, "lenient"), "must be a bool", fix, lenient))
    return problems


def check_fsdp_size(fsdp_size: int, world: int, path: str) -> list[Problem]:
    """HSDP builds a (world / fsdp_size, fsdp_size) mesh: -1, or a divisor of the world."""
    if fsdp_size == -1 or (fsdp_size >= 1 and world % fsdp_size == 0):
        return []
    fix = f"use -1 (shard over all {world} ranks) or a divisor of nnodes x n_gpus_per_node"
    message = f"must be -1 or a divisor of the world size {world}"
    return [Problem(join_path(path, "fsdp_size"), message, fix, fsdp_size)]


def check_start(cfg: BackendConfig, bc: str, read_models: bool = True) -> list[Problem]:
    """The PPO/GRPO tree's start refusals (the model-dependent ones: ``rules_model.py``, only
    with ``read_models``)."""
    model_path = join_path(bc, "actor_rollout_ref", "model")
    fn = cfg.custom_reward_function
    world = cfg.trainer.nnodes * cfg.trainer.n_gpus_per_node
    actor_fsdp = cfg.actor_rollout_ref.actor.fsdp_config.fsdp_size
    critic_fsdp = cfg.critic.model.fsdp_config.fsdp_size
    return (
        check_lora_adapter(cfg.actor_rollout_ref.model, model_path)
        + check_builtin_reward_kwargs(
            fn.path, fn.reward_kwargs, join_path(bc, "custom_reward_function")
        )
        + check_fsdp_size(
            actor_fsdp, world, join_path(bc, "actor_rollout_ref", "actor", "fsdp_config")
        )
        + check_fsdp_size(critic_fsdp, world, join_path(bc, "critic", "model", "fsdp_config"))
        + (check_model(cfg, bc) if read_models else [])
    )
