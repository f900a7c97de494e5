"""KL estimators between the policy and the reference, per response token.

Δ = log π(a_t) − log π_ref(a_t) for the sampled token (π = old policy for in-reward KL, the
current policy for the KL loss):

    kl / k1          Δ
    abs              |Δ|
    mse / k2         ½·Δ²
    low_var_kl / k3  x = clamp(−Δ, −20, 20); clamp(eˣ − x − 1, −10, 10)
    full             exact Σ_v p_v (log p_v − log q_v) from both logits (see `full_kl`)

A "+" suffix (`k1+`, `k3+`, …) is the straight-through variant: the forward value of the base
estimator with the gradient of k2 (unbiased gradient of the true KL for on-policy samples).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from kuberl_runtime.algorithms.aggregation import GlobalBatch, agg_loss
from kuberl_runtime.algorithms.chunked import DEFAULT_CHUNK_ROWS
from kuberl_runtime.algorithms.full_kl import full_kl_from_logits
from kuberl_runtime.algorithms.registry import Registry

KLEstimator = Callable[[torch.Tensor], torch.Tensor]

# Token-level estimators are functions of Δ alone; `full` needs the logits and is handled apart.
KL_ESTIMATORS: Registry[KLEstimator] = Registry("KL estimator")

# k3's clamps: exp(20) stays finite in fp32, and ±10 bounds any one token's penalty.
K3_LOG_RATIO_CLAMP = 20.0
K3_VALUE_CLAMP = 10.0
FULL_KL = "full"
STRAIGHT_THROUGH_SUFFIX = "+"


@KL_ESTIMATORS.register("kl", "k1")
def k1(delta: torch.Tensor) -> torch.Tensor:
    return delta


@KL_ESTIMATORS.register("abs")
def abs_kl(delta: torch.Tensor) -> torch.Tensor:
    return delta.abs()


@KL_ESTIMATORS.register("mse", "k2")
def k2(delta: torch.Tensor) -> torch.Tensor:
    return 0.5 * delta.square()


@KL_ESTIMATORS.register("low_var_kl", "k3")
def k3(delta: torch.Tensor) -> torch.Tensor:
    log_ratio = (-delta).clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)
    return (log_ratio.exp() - log_ratio - 1).clamp(-K3_VALUE_CLAMP, K3_VALUE_CLAMP)


def kl_type_names() -> tuple[str, ...]:
    """Every accepted `kl_penalty` / `kl_loss_type` value (without the "+" variants)."""
    return (*KL_ESTIMATORS.names(), FULL_KL)


def kl_penalty(
    logprob: torch.Tensor,
    ref_logprob: torch.Tensor,
    *,
    kl_type: str,
    logits: torch.Tensor | None = None,
    ref_logits: torch.Tensor | None = None,
    chunk_size: int = DEFAULT_CHUNK_ROWS,
) -> torch.Tensor:
    """Per-token KL estimate, shaped like `logprob`; `kl_type` is a name from the module docstring.

    `full` ignores the sampled-token log-probs and needs `logits` and `ref_logits` (…, V) for the
    same positions, already divided by the temperature.
    """
    if kl_type == FULL_KL:
        if logits is None or ref_logits is None:
            raise ValueError(
                "kl type 'full' needs the policy and reference logits (logits=, ref_logits=), "
                "not just the sampled tokens' log-probs"
            )
        return full_kl_from_logits(logits, ref_logits, chunk_size=chunk_size)
    base, straight_through = kl_type.removesuffix(STRAIGHT_THROUGH_SUFFIX), kl_type.endswith("+")
    if base not in KL_ESTIMATORS:
        names = (*kl_type_names(), *(f"{n}+" for n in KL_ESTIMATORS.names()))
        raise ValueError(f"unknown kl type {kl_type!r}; known: {', '.join(names)}")
    delta = logprob - ref_logprob
    value = KL_ESTIMATORS.get(base)(delta)
    if not straight_through:
        return value
    surrogate = k2(delta)
    return surrogate + (value - surrogate).detach()


def kl_loss(
    *,
    logprob: torch.Tensor,
    ref_logprob: torch.Tensor,
    response_mask: torch.Tensor,
    kl_loss_type: str = "low_var_kl",
    loss_agg_mode: str = "token-mean",
    logits: torch.Tensor | None = None,
    ref_logits: torch.Tensor | None = None,
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """KL to the reference as an actor loss term (`actor.use_kl_loss`), before `kl_loss_coef`.

    Aggregated like the policy loss (verl passes the same `loss_scale_factor` and global-batch
    counts). Returns the aggregated loss and {"actor/kl_loss": value}; the caller adds coef·loss.
    """
    kld = kl_penalty(
        logprob, ref_logprob, kl_type=kl_loss_type, logits=logits, ref_logits=ref_logits
    )
    loss = agg_loss(kld, response_mask, loss_agg_mode, loss_scale_factor, global_batch)
    return loss, {"actor/kl_loss": loss.detach()}
