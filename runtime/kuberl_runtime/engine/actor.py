"""The actor: log-probs of responses under the current (or reference) policy, and the PPO update.

The update follows verl 0.9.1's engine workers: this rank's rows are cut sequentially into
mini-batches of `ppo_mini_batch_size · n / dp_size` rows (the plan's `mini_batch_rows_per_rank`);
each mini-batch is one optimizer step, its gradient accumulated over micro-batches whose losses
are aggregated with the whole mini-batch's counts (`GlobalBatch`: valid tokens on all ranks, rows
`ppo_mini_batch_size · n`, `dp_size`), so the sum of the micro-batch losses is the mini-batch
loss however the rows are split (fixed or dynamic micro-batches). Loss metrics (`actor/pg_loss`,
`actor/kl_loss`) are that sum per mini-batch (verl's SUM aggregation), averaged over mini-batches
and ranks by the loop; ratio metrics (clip fractions, ppo_kl) are per micro-batch.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass

import torch
from torch import nn

from kuberl_api.plan.rollout_correction import RolloutCorrectionPlan
from kuberl_api.plan.sections import ActorPlan
from kuberl_runtime.algorithms import (
    GlobalBatch,
    LossModeParams,
    agg_loss,
    kl_loss,
)
from kuberl_runtime.engine.logprob import forward_responses
from kuberl_runtime.engine.micro import (
    MicroBatching,
    forward_in_micro_batches,
    global_batch_of,
)
from kuberl_runtime.engine.model_builder import is_lora, model_device
from kuberl_runtime.engine.multimodal import (
    MROPE_POSITION_IDS,
    MULTI_MODAL_INPUTS,
    join_multi_modal,
)
from kuberl_runtime.engine.optim import build_lr_scheduler, build_optimizer, clip_and_step
from kuberl_runtime.engine.optim_offload import OptimizerOffload
from kuberl_runtime.engine.packing import fixed_micro_batches
from kuberl_runtime.engine.ulysses import NO_SP, UlyssesGroup
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.rollout_correction import ROLLOUT_IS_WEIGHTS, policy_loss_fn

_FORWARD_KEYS = ("input_ids", "attention_mask", "position_ids", "responses", "response_mask")
# Summed over a mini-batch's micro-batches (their global-batch losses add up to its loss).
SUMMED_METRICS = ("actor/pg_loss", "actor/kl_loss", "actor/entropy")


@dataclass(frozen=True)
class ActorSettings:
    temperature: float
    use_remove_padding: bool
    rollout_n: int
    world_size: int
    """Data-parallel ranks: the world / sp."""
    total_training_steps: int
    sp: UlyssesGroup = NO_SP
    """This rank's Ulysses sequence-parallel group (engine/ulysses.py)."""
    rollout_correction: RolloutCorrectionPlan | None = None
    """Bypass mode swaps the policy loss (trainer/rollout_correction.py policy_loss_fn)."""


class Actor:
    def __init__(
        self,
        model: nn.Module,
        cfg: ActorPlan,
        settings: ActorSettings,
        ref_model: nn.Module | None = None,
    ) -> None:
        self.model = model
        self.cfg = cfg
        self.settings = settings
        self.ref_model = ref_model
        self.optimizer = build_optimizer(model, cfg.optim)
        self.optimizer_offload = OptimizerOffload(
            self.optimizer, enabled=cfg.fsdp_config.optimizer_offload
        )
        self.lr_scheduler = build_lr_scheduler(
            self.optimizer, cfg.optim, settings.total_training_steps
        )
        self.policy_loss = policy_loss_fn(settings.rollout_correction)

    def compute_log_prob(
        self, batch: Batch, batching: MicroBatching, *, calculate_entropy: bool = False
    ) -> dict[str, torch.Tensor]:
        """`old_log_probs` (and `entropys`) of each row's response under the current policy."""
        self.model.eval()

        def run(micro: Batch) -> dict[str, torch.Tensor]:
            out = self._forward(self.model, micro, calculate_entropy)
            result = {"old_log_probs": out.log_probs}
            if calculate_entropy:
                result["entropys"] = out.entropy
            return result

        return forward_in_micro_batches(_forward_view(batch), batching, run)

    def compute_ref_log_prob(self, batch: Batch, batching: MicroBatching) -> torch.Tensor:
        """`ref_log_prob`: the reference model, or the actor with its LoRA adapters disabled."""
        model = self.ref_model if self.ref_model is not None else self.model
        model.eval()
        context = (
            self.model.disable_adapter()
            if self.ref_model is None and is_lora(self.model)
            else contextlib.nullcontext()
        )
        assert self.ref_model is not None or is_lora(self.model), "no reference model"

        def run(micro: Batch) -> dict[str, torch.Tensor]:
            return {"ref_log_prob": self._forward(model, micro, False).log_probs}

        with context:
            out = forward_in_micro_batches(_forward_view(batch), batching, run)
        return out["ref_log_prob"]

    def update_policy(self, batch: Batch) -> dict[str, list[float]]:
        """PPO epochs over the mini-batches; π_old is the batch's `old_log_probs` (verl 0.9.1)."""
        return self._update(batch, entropys=None)

    def update_policy_on_policy(self, batch: Batch) -> tuple[dict[str, list[float]], torch.Tensor]:
        """The update of an exactly on-policy step (`on_policy_shortcut`; one epoch, one
        mini-batch): π_old is each micro-batch's own log-prob, detached, before the one optimizer
        step, so no old-log-prob forward is needed (TRL at one iteration). Also returns every
        row's per-token entropy under that same policy, for `actor/entropy`."""
        cfg = self.cfg
        if cfg.ppo_epochs != 1 or len(batch) > cfg.mini_batch_rows_per_rank:
            raise ValueError(
                f"the on-policy update needs one epoch over one mini-batch: ppo_epochs "
                f"{cfg.ppo_epochs}, {len(batch)} rows > {cfg.mini_batch_rows_per_rank} per "
                "mini-batch"
            )
        entropys = torch.zeros(batch["responses"].shape, dtype=torch.float32)
        return self._update(batch, entropys=entropys), entropys

    def _update(self, batch: Batch, entropys: torch.Tensor | None) -> dict[str, list[float]]:
        """`entropys` given: on-policy (π_old = π_θ.detach()); filled with each row's entropy."""
        cfg = self.cfg
        metrics: dict[str, list[float]] = defaultdict(list)
        mini_batches = fixed_micro_batches(len(batch), cfg.mini_batch_rows_per_rank)
        batching = MicroBatching(
            cfg.ppo_micro_batch_size_per_gpu,
            cfg.use_dynamic_bsz,
            cfg.ppo_max_token_len_per_gpu,
            self.settings.sp.size,
        )
        self.model.train()
        for _ in range(cfg.ppo_epochs):
            for rows in mini_batches:
                mini = batch.select(rows)
                global_batch = global_batch_of(
                    mini,
                    dp_size=self.settings.world_size,
                    global_batch_size=cfg.ppo_mini_batch_size * self.settings.rollout_n,
                    device=model_device(self.model),
                    sp_size=self.settings.sp.size,
                )
                summed: dict[str, float] = defaultdict(float)
                for micro_rows in batching.split(mini):
                    micro = mini.select(micro_rows)
                    if entropys is None:
                        micro_metrics = self.backward_micro(micro, global_batch)
                    else:
                        micro_metrics, entropy = self._backward_on_policy(micro, global_batch)
                        entropys[torch.as_tensor(rows)[micro_rows]] = entropy.float().cpu()
                    for key, value in micro_metrics.items():
                        if key in SUMMED_METRICS:
                            summed[key] += float(value)
                        else:
                            metrics[key].append(float(value))
                for key, value in summed.items():
                    metrics[key].append(value)
                with self.optimizer_offload.for_step():
                    grad_norm, _ = clip_and_step(self.model, self.optimizer, cfg.grad_clip)
                metrics["actor/grad_norm"].append(grad_norm)
        metrics["actor/lr"].append(self.lr_scheduler.get_last_lr()[0])
        self.lr_scheduler.step()
        return dict(metrics)

    def backward_micro(self, micro: Batch, global_batch: GlobalBatch) -> dict[str, torch.Tensor]:
        """Loss of one micro-batch in the mini-batch's global-batch form, backpropagated."""
        with self.saved_activations():
            loss, metrics, _ = self._loss(micro.to(model_device(self.model)), global_batch)
        loss.backward()
        return metrics

    def saved_activations(self) -> contextlib.AbstractContextManager:
        """Where the update's forward keeps what backward needs: host memory with
        `model.enable_activation_offload` (pinned when an accelerator is present, copied back in
        backward), else where autograd puts it."""
        if not self.cfg.activation_offload:
            return contextlib.nullcontext()
        return torch.autograd.graph.save_on_cpu(pin_memory=torch.accelerator.is_available())

    def _backward_on_policy(
        self, micro: Batch, global_batch: GlobalBatch
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        with self.saved_activations():
            loss, metrics, entropy = self._loss(
                micro.to(model_device(self.model)), global_batch, on_policy=True
            )
        loss.backward()
        assert entropy is not None
        return metrics, entropy

    def _loss(
        self, micro: Batch, global_batch: GlobalBatch, on_policy: bool = False
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor | None]:
        """The micro-batch's loss and metrics, and its per-token entropy (detached) if computed.

        `on_policy`: π_old is this pass's own log-prob, detached (ratio 1), and the entropy is
        always computed (the step's `actor/entropy`), entering the loss only with entropy_coeff.
        """
        cfg = self.cfg
        mask = micro["response_mask"]
        need_entropy = cfg.entropy_coeff != 0 or cfg.calculate_entropy
        out = self._forward(self.model, micro, need_entropy or on_policy)
        assert out.log_probs is not None
        old_log_prob = out.log_probs.detach() if on_policy else micro["old_log_probs"]
        loss, metrics = self.policy_loss(
            cfg.policy_loss.loss_mode,
            old_log_prob=old_log_prob,
            log_prob=out.log_probs,
            advantages=micro["advantages"],
            response_mask=mask,
            loss_agg_mode=cfg.loss_agg_mode,
            clip_ratio=cfg.clip_ratio,
            clip_ratio_low=cfg.clip_ratio_low,
            clip_ratio_high=cfg.clip_ratio_high,
            clip_ratio_c=cfg.clip_ratio_c,
            loss_scale_factor=cfg.loss_scale_factor,
            global_batch=global_batch,
            rollout_is_weights=micro.tensors.get(ROLLOUT_IS_WEIGHTS),
            mode_params=LossModeParams(**cfg.policy_loss.model_dump(exclude={"loss_mode"})),
        )
        metrics = dict(metrics)
        if need_entropy:
            entropy = agg_loss(
                out.entropy, mask, cfg.loss_agg_mode, cfg.loss_scale_factor, global_batch
            )
            metrics["actor/entropy"] = entropy.detach()
            loss = loss - cfg.entropy_coeff * entropy
        if cfg.use_kl_loss:
            kl, kl_metrics = kl_loss(
                logprob=out.log_probs,
                ref_logprob=micro["ref_log_prob"],
                response_mask=mask,
                kl_loss_type=cfg.kl_loss_type,
                loss_agg_mode=cfg.loss_agg_mode,
                loss_scale_factor=cfg.loss_scale_factor,
                global_batch=global_batch,
            )
            loss = loss + cfg.kl_loss_coef * kl
            metrics.update(kl_metrics)
            metrics["actor/kl_coef"] = torch.tensor(cfg.kl_loss_coef)
        return loss, metrics, None if out.entropy is None else out.entropy.detach()

    def _forward(self, model: nn.Module, micro: Batch, calculate_entropy: bool):
        device = model_device(model)
        return forward_responses(
            model,
            micro.to(device).tensors,
            temperature=self.settings.temperature,
            calculate_entropy=calculate_entropy,
            use_remove_padding=self.settings.use_remove_padding,
            sp=self.settings.sp,
            multi_modal=join_multi_modal(micro.objects.get(MULTI_MODAL_INPUTS), device),
        )


def _forward_view(batch: Batch) -> Batch:
    """The forward passes' tensors, and the rows' image inputs for a vision-language batch."""
    view = batch.pick(
        *_FORWARD_KEYS, *([MROPE_POSITION_IDS] if MROPE_POSITION_IDS in batch else [])
    )
    if MULTI_MODAL_INPUTS in batch.objects:
        view.objects[MULTI_MODAL_INPUTS] = batch.objects[MULTI_MODAL_INPUTS]
    return view
