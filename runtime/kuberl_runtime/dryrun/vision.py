"""A vision-language model (Qwen2.5-VL) in the dry run: its vision encoder's state is counted.

The model is built by the runtime's own path (`model_builder.build_causal_lm_empty` picks the
image-text class for a VL config) and sharded with it, vision blocks included, so the sharded
parameters of the encoder are resident as in a run. The dry run's rows are text only: the
encoder never runs, so its activations and gradients are not in the peaks. Its AdamW state is:
unless `freeze_vision_tower`, every trainable vision parameter gets a zero gradient before the
first (warm-up) step, which creates that state as the first step with images would.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from kuberl_runtime.dryrun.sequence_parallel import SP_KEY
from kuberl_runtime.engine.model_builder import vision_tower
from kuberl_runtime.engine.ulysses import UlyssesGroup


def vision_parameters(model: nn.Module) -> int:
    """The vision encoder's parameters (global count), 0 for a text model."""
    tower = vision_tower(model)
    return 0 if tower is None else sum(p.numel() for p in tower.parameters())


def refuse_sequence_parallel(config: dict[str, Any], sp: UlyssesGroup) -> None:
    """Ulysses SP with a VL model runs (docs/sp.md) but is not measured here yet: refused."""
    if sp.size > 1 and "vision_config" in config:
        raise ValueError(
            f"{SP_KEY}={sp.size} with a vision-language model is not supported yet by the dry "
            "run (the runtime runs it); plan with 1 for an estimate without SP"
        )


def create_vision_optimizer_state(model: nn.Module) -> None:
    """Zero gradients on the trainable vision parameters (see the module doc)."""
    tower = vision_tower(model)
    if tower is None:
        return
    for param in tower.parameters():
        if param.requires_grad and param.grad is None:
            param.grad = torch.zeros_like(param)
