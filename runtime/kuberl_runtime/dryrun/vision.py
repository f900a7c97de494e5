"""A vision-language model (Qwen2.5-VL) in the dry run: its vision encoder's state is counted.

The model is built by the runtime's own path (`model_builder.build_causal_lm_empty` picks the
image-text class for a VL config) and sharded with it, vision blocks included, so the sharded
parameters of the encoder are resident as in a run. The dry run's rows are text only: the
encoder never runs, so its activations are not in the peaks. Its gradients and AdamW state are:
unless `freeze_vision_tower`, every trainable vision parameter gets a zero gradient after each
update's backward (with images, the encoder's gradients come last in it), so every optimizer
step, the warm-up's and the measured one, steps it as a step with images would. (Stepped in
the warm-up only, the measured step ran over other tensors, missed DTensor's
sharding-propagation cache and counted its global-shape fake temporaries.)
With Ulysses SP, each rank embeds the whole sequence and its language model runs on its slice
(engine/ulysses.py `split_after_image_merge`), measured as the runtime runs it.
"""

from __future__ import annotations

import torch
from torch import nn

from kuberl_runtime.engine.model_builder import vision_tower


def vision_parameters(model: nn.Module) -> int:
    """The vision encoder's parameters (global count), 0 for a text model."""
    tower = vision_tower(model)
    return 0 if tower is None else sum(p.numel() for p in tower.parameters())


def create_vision_optimizer_state(model: nn.Module) -> None:
    """Zero gradients on the trainable vision parameters (see the module doc)."""
    tower = vision_tower(model)
    if tower is None:
        return
    for param in tower.parameters():
        if param.requires_grad and param.grad is None:
            param.grad = torch.zeros_like(param)
