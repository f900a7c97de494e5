"""Pure RL math on tensors: advantage estimators, KL, policy/value losses, entropy, aggregation.

No state (the KL controllers aside), no distributed code, no config: explicit keyword arguments
that a wiring layer maps from the typed config. Importing the package registers the built-in
advantage estimators and policy losses.
"""

from kuberl_runtime.algorithms import group_advantages as _group_advantages  # noqa: F401  registers
from kuberl_runtime.algorithms import policy_loss_extra as _policy_loss_extra  # noqa: F401  registers
from kuberl_runtime.algorithms.advantages import (
    ADVANTAGE_ESTIMATORS,
    compute_advantage,
    get_advantage_estimator,
    register_advantage_estimator,
)
from kuberl_runtime.algorithms.aggregation import LOSS_AGG_MODES, GlobalBatch, agg_loss
from kuberl_runtime.algorithms.entropy import entropy_from_logits
from kuberl_runtime.algorithms.full_kl import full_kl_from_logits
from kuberl_runtime.algorithms.kl import kl_loss, kl_penalty, kl_type_names
from kuberl_runtime.algorithms.kl_control import (
    AdaptiveKLController,
    FixedKLController,
    apply_kl_penalty,
    build_kl_controller,
)
from kuberl_runtime.algorithms.masked import masked_mean, masked_sum, masked_var, masked_whiten
from kuberl_runtime.algorithms.policy_loss import (
    POLICY_LOSSES,
    LossModeParams,
    compute_policy_loss,
    get_policy_loss_fn,
    register_policy_loss,
)
from kuberl_runtime.algorithms.registry import UnknownAlgorithmError
from kuberl_runtime.algorithms.value_loss import value_loss

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "LOSS_AGG_MODES",
    "POLICY_LOSSES",
    "AdaptiveKLController",
    "FixedKLController",
    "GlobalBatch",
    "LossModeParams",
    "UnknownAlgorithmError",
    "agg_loss",
    "apply_kl_penalty",
    "build_kl_controller",
    "compute_advantage",
    "compute_policy_loss",
    "entropy_from_logits",
    "full_kl_from_logits",
    "get_advantage_estimator",
    "get_policy_loss_fn",
    "kl_loss",
    "kl_penalty",
    "kl_type_names",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "register_advantage_estimator",
    "register_policy_loss",
    "value_loss",
]
