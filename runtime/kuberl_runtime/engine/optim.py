"""AdamW, warmup + constant/cosine learning-rate schedules, and clipping that skips bad steps."""

from __future__ import annotations

import logging
import math

import torch
from torch import nn
from torch.distributed.tensor import DTensor
from torch.optim.lr_scheduler import LambdaLR

from kuberl_api.plan.sections import OptimPlan

logger = logging.getLogger(__name__)


def build_optimizer(model: nn.Module, optim: OptimPlan) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(
        params,
        lr=optim.lr,
        betas=(optim.betas[0], optim.betas[1]),
        weight_decay=optim.weight_decay,
        foreach=_foreach(params),
    )


def _foreach(params: list[torch.Tensor]) -> bool | None:
    """The multi-tensor AdamW for host-resident parameters too: torch picks it by default only
    for accelerator tensors, and the per-parameter loop over FSDP2's DTensors on the CPU costs
    ~5x more per step (tiny bench model: 32 ms vs 6 ms; 4 x 256 model: 61 ms vs 46 ms). Elsewhere
    torch's own choice (None)."""
    return True if params and all(p.device.type == "cpu" for p in params) else None


def warmup_steps(optim: OptimPlan, total_training_steps: int) -> int:
    if optim.lr_warmup_steps > 0:
        return optim.lr_warmup_steps
    return int(optim.lr_warmup_steps_ratio * total_training_steps)


def lr_multiplier(step: int, *, warmup: int, total: int, optim: OptimPlan) -> float:
    """Linear warmup 0→1, then constant, or cosine down to `min_lr_ratio`."""
    if step < warmup:
        return step / max(1, warmup)
    if optim.lr_scheduler_type != "cosine":
        return 1.0
    progress = (step - warmup) / max(1, total - warmup)
    floor = optim.min_lr_ratio
    cosine = math.cos(2 * math.pi * optim.num_cycles * progress)
    return max(floor, 0.5 * (1 + floor) + 0.5 * (1 - floor) * cosine)


def build_lr_scheduler(
    optimizer: torch.optim.Optimizer, optim: OptimPlan, total_training_steps: int
) -> LambdaLR:
    warmup = warmup_steps(optim, total_training_steps)

    def multiplier(step: int) -> float:
        return lr_multiplier(step, warmup=warmup, total=total_training_steps, optim=optim)

    return LambdaLR(optimizer, multiplier)


def clip_and_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, max_norm: float
) -> tuple[float, bool]:
    """Clip gradients to `max_norm` and step; a non-finite norm skips the step (grads dropped)."""
    total = grad_norm(model)
    norm = float(total)
    if not math.isfinite(norm):
        logger.warning("grad norm is %s: skipping this optimizer step", norm)
        optimizer.zero_grad(set_to_none=True)
        return norm, False
    clip_and_step_unchecked(model, optimizer, max_norm, total)
    return norm, True


def grad_norm(model: nn.Module) -> torch.Tensor:
    """The global L2 norm of the gradients (a world all-reduce for sharded ones)."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    total = torch.nn.utils.get_total_norm(grads, norm_type=2.0)
    return total.full_tensor() if isinstance(total, DTensor) else total


def clip_and_step_unchecked(
    model: nn.Module, optimizer: torch.optim.Optimizer, max_norm: float, total: torch.Tensor
) -> None:
    """Clip to `max_norm` given the norm, step, drop the gradients (the dry run's path too)."""
    torch.nn.utils.clip_grads_with_norm_(
        [p for p in model.parameters() if p.grad is not None], max_norm, total
    )
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
