"""Rule-based and user-defined rewards, selected by data_source or custom_reward_function.

`placement.place_scores` (torch) is imported separately so scoring alone stays torch-free.
"""

from kuberl_runtime.rewards.errors import RewardError
from kuberl_runtime.rewards.function import (
    RewardFunction,
    default_reward_function,
    load_custom_reward_function,
)
from kuberl_runtime.rewards.manager import (
    RewardManager,
    RewardOutput,
    build_reward_manager,
    decode_responses,
    reward_manager_for,
)
from kuberl_runtime.rewards.registry import (
    default_compute_score,
    known_data_sources,
    register_scorer,
)

__all__ = [
    "RewardError",
    "RewardFunction",
    "RewardManager",
    "RewardOutput",
    "build_reward_manager",
    "decode_responses",
    "default_compute_score",
    "default_reward_function",
    "known_data_sources",
    "load_custom_reward_function",
    "register_scorer",
    "reward_manager_for",
]
