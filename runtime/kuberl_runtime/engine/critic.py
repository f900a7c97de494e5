"""The critic: values for each response token (from the position before it) and its update.

The update is the actor's (engine/actor.py): sequential mini-batches of
`ppo_mini_batch_size · n / dp_size` rows, each micro-batch's value loss aggregated with the whole
mini-batch's counts (verl 0.9.1's engine `value_loss`), `critic/vf_loss` summed per mini-batch.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import nn

from kuberl_api.plan.sections import CriticPlan
from kuberl_runtime.algorithms import value_loss
from kuberl_runtime.engine.logprob import forward_responses
from kuberl_runtime.engine.micro import (
    MicroBatching,
    forward_in_micro_batches,
    global_batch_of,
)
from kuberl_runtime.engine.model_builder import model_device
from kuberl_runtime.engine.optim import build_lr_scheduler, build_optimizer, clip_and_step
from kuberl_runtime.engine.optim_offload import OptimizerOffload
from kuberl_runtime.engine.packing import fixed_micro_batches
from kuberl_runtime.engine.ulysses import NO_SP, UlyssesGroup
from kuberl_runtime.trainer.batch import Batch

_FORWARD_KEYS = ("input_ids", "attention_mask", "position_ids", "responses", "response_mask")


class Critic:
    def __init__(
        self,
        model: nn.Module,
        cfg: CriticPlan,
        *,
        rollout_n: int,
        world_size: int,
        total_training_steps: int,
        sp: UlyssesGroup = NO_SP,
    ) -> None:
        """`world_size`: data-parallel ranks (the world / sp); `sp`: this rank's Ulysses group."""
        self.model = model
        self.cfg = cfg
        self.rollout_n = rollout_n
        self.world_size = world_size
        self.sp = sp
        self.optimizer = build_optimizer(model, cfg.optim)
        self.optimizer_offload = OptimizerOffload(
            self.optimizer, enabled=cfg.model.fsdp_config.optimizer_offload
        )
        self.lr_scheduler = build_lr_scheduler(self.optimizer, cfg.optim, total_training_steps)

    def compute_values(self, batch: Batch) -> torch.Tensor:
        cfg = self.cfg
        batching = MicroBatching(
            cfg.forward_micro_batch_size_per_gpu,
            cfg.use_dynamic_bsz,
            cfg.forward_max_token_len_per_gpu,
            self.sp.size,
        )
        self.model.eval()

        def run(micro: Batch) -> dict[str, torch.Tensor]:
            values = self._forward(micro).cpu() * micro["response_mask"]
            return {"values": values}

        return forward_in_micro_batches(batch.pick(*_FORWARD_KEYS), batching, run)["values"]

    def update_critic(self, batch: Batch) -> dict[str, list[float]]:
        cfg = self.cfg
        mini_rows = max(cfg.ppo_mini_batch_size * self.rollout_n // self.world_size, 1)
        batching = MicroBatching(
            cfg.ppo_micro_batch_size_per_gpu,
            cfg.use_dynamic_bsz,
            cfg.ppo_max_token_len_per_gpu,
            self.sp.size,
        )
        metrics: dict[str, list[float]] = defaultdict(list)
        self.model.train()
        for _ in range(cfg.ppo_epochs):
            for rows in fixed_micro_batches(len(batch), mini_rows):
                mini = batch.select(rows)
                global_batch = global_batch_of(
                    mini,
                    dp_size=self.world_size,
                    global_batch_size=cfg.ppo_mini_batch_size * self.rollout_n,
                    device=model_device(self.model),
                    sp_size=self.sp.size,
                )
                vf_loss = 0.0
                for micro_rows in batching.split(mini):
                    micro = mini.select(micro_rows).to(model_device(self.model))
                    loss, micro_metrics = value_loss(
                        vpreds=self._forward(micro),
                        values=micro["values"],
                        returns=micro["returns"],
                        response_mask=micro["response_mask"],
                        cliprange_value=cfg.cliprange_value,
                        loss_agg_mode=cfg.loss_agg_mode,
                        loss_scale_factor=cfg.loss_scale_factor,
                        global_batch=global_batch,
                    )
                    loss.backward()
                    vf_loss += float(micro_metrics.pop("critic/vf_loss"))
                    for key, value in micro_metrics.items():
                        metrics[key].append(float(value))
                metrics["critic/vf_loss"].append(vf_loss)
                with self.optimizer_offload.for_step():
                    grad_norm, _ = clip_and_step(self.model, self.optimizer, cfg.grad_clip)
                metrics["critic/grad_norm"].append(grad_norm)
        metrics["critic/lr"].append(self.lr_scheduler.get_last_lr()[0])
        self.lr_scheduler.step()
        return dict(metrics)

    def _forward(self, micro: Batch) -> torch.Tensor:
        out = forward_responses(
            self.model,
            micro.to(model_device(self.model)).tensors,
            use_remove_padding=self.cfg.model.use_remove_padding,
            value_head=True,
            sp=self.sp,
        )
        assert out.values is not None
        return out.values
