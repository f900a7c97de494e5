"""Clipped value loss for the critic (`critic.cliprange_value`)."""

from __future__ import annotations

import torch

from kuberl_runtime.algorithms.aggregation import GlobalBatch, agg_loss
from kuberl_runtime.algorithms.masked import masked_mean


def value_loss(
    *,
    vpreds: torch.Tensor,
    values: torch.Tensor,
    returns: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float = 0.5,
    loss_agg_mode: str = "token-mean",
    loss_scale_factor: float | None = None,
    global_batch: GlobalBatch | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """L_v = ½·agg(max((v − R)², (v̂ − R)²)), v̂ = clip(v, V_old − c, V_old + c).

    vpreds: the critic's current predictions; values: the predictions at rollout time (V_old);
    returns: R from the advantage estimator. Metrics: `critic/vf_loss`, `critic/vf_clipfrac`
    (tokens where the clipped error is the larger one), `critic/vpred_mean`.
    """
    vpred_clipped = torch.clamp(vpreds, values - cliprange_value, values + cliprange_value)
    unclipped_error = (vpreds - returns) ** 2
    clipped_error = (vpred_clipped - returns) ** 2
    token_loss = torch.maximum(unclipped_error, clipped_error)
    vf_loss = 0.5 * agg_loss(
        token_loss, response_mask, loss_agg_mode, loss_scale_factor, global_batch
    )
    metrics = {
        "critic/vf_loss": vf_loss.detach(),
        "critic/vf_clipfrac": masked_mean((clipped_error > unclipped_error).float(), response_mask),
        "critic/vpred_mean": masked_mean(vpreds, response_mask).detach(),
    }
    return vf_loss, metrics
