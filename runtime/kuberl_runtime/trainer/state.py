"""What a checkpoint holds beyond model and optimizer shards, and putting it back."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kuberl_runtime.checkpoint.manager import CheckpointManager, TrainState
from kuberl_runtime.trainer.components import Components


def train_state(c: Components, kl_ctrl: Any, step: int) -> TrainState:
    modules = {"actor": (c.actor.model, c.actor.optimizer)}
    extra: dict[str, Any] = {
        "actor_lr_scheduler": c.actor.lr_scheduler.state_dict(),
        "rng": capture_rng(),
        "kl_coef": None if kl_ctrl is None else kl_ctrl.value,
    }
    if c.critic is not None:
        modules["critic"] = (c.critic.model, c.critic.optimizer)
        extra["critic_lr_scheduler"] = c.critic.lr_scheduler.state_dict()
    data = {"global_step": step, "sampler": c.sampler.state_dict()}
    return TrainState(modules, extra, data)


def restore_train_state(
    c: Components, manager: CheckpointManager, step_dir: Path, kl_ctrl: Any
) -> int:
    """Load `step_dir` into the components; returns its global step."""
    state = train_state(c, kl_ctrl, 0)
    manager.load(step_dir, state)
    # Loading puts optimizer state beside the parameters; with optimizer_offload it lives on
    # the host until the next step.
    c.actor.optimizer_offload.park()
    if c.critic is not None:
        c.critic.optimizer_offload.park()
    if state.extra:  # load_contents without `extra`: fresh schedulers, RNG and KL coefficient
        _restore_extra(c, state.extra, kl_ctrl)
    c.sampler.load_state_dict(state.data["sampler"])
    return int(state.data["global_step"])


def _restore_extra(c: Components, extra: dict[str, Any], kl_ctrl: Any) -> None:
    c.actor.lr_scheduler.load_state_dict(extra["actor_lr_scheduler"])
    if c.critic is not None and "critic_lr_scheduler" in extra:
        c.critic.lr_scheduler.load_state_dict(extra["critic_lr_scheduler"])
    if kl_ctrl is not None and extra.get("kl_coef") is not None:
        kl_ctrl.value = extra["kl_coef"]
    restore_rng(extra["rng"])


def capture_rng() -> dict[str, Any]:
    """Every generator's state in types `torch.load(weights_only=True)` reads back (numpy's key
    array as a list of ints)."""
    kind, key, pos, has_gauss, gauss = np.random.get_state()
    rng = {
        "cpu": torch.get_rng_state(),
        "numpy": (kind, [int(k) for k in key], int(pos), int(has_gauss), float(gauss)),
        "random": random.getstate(),
    }
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return rng


def restore_rng(rng: dict[str, Any]) -> None:
    torch.set_rng_state(rng["cpu"])
    kind, key, pos, has_gauss, gauss = rng["numpy"]
    np.random.set_state((kind, np.array(key, dtype=np.uint32), pos, has_gauss, gauss))
    random.setstate(rng["random"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])


def step_of(path: str | Path) -> int:
    match = re.search(r"global_step_(\d+)", str(path))
    if not match:
        raise ValueError(
            f"trainer.resume_from_path={path!r} must name a global_step_N checkpoint directory"
        )
    return int(match.group(1))
