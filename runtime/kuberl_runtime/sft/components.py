"""What an SFT run needs, built once from its plan with the RL engine's own builders."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import torch
from torch import nn

from kuberl_api.plan.sft import SFTPlan
from kuberl_runtime.config import RunConfig
from kuberl_runtime.data import PromptBatchSampler
from kuberl_runtime.data.tokenizer import load_tokenizer
from kuberl_runtime.device import Device
from kuberl_runtime.distributed import RankInfo
from kuberl_runtime.engine.fsdp import torch_dtype
from kuberl_runtime.engine.init import build_sharded
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm, build_causal_lm_empty
from kuberl_runtime.engine.optim import build_lr_scheduler, build_optimizer
from kuberl_runtime.engine.ulysses import UlyssesGroup, build_ulysses_group, ulysses_model
from kuberl_runtime.sft.data import RenderOptions, SFTExample, load_sft_examples
from kuberl_runtime.trainer.components import actor_model_spec

SP_KEY = "engine.ulysses_sequence_parallel_size"


@dataclass
class SFTComponents:
    run: RunConfig
    device: Device
    ranks: RankInfo
    tokenizer: Any
    pad_id: int
    train_data: list[SFTExample]
    val_data: list[SFTExample]
    sampler: PromptBatchSampler
    spec: ModelSpec
    model: nn.Module
    optimizer: torch.optim.Optimizer
    lr_scheduler: Any
    total_training_steps: int
    sp: UlyssesGroup
    """This rank's Ulysses sequence-parallel group (size 1: none), as in the RL trainer."""

    @property
    def plan(self) -> SFTPlan:
        assert isinstance(self.run.plan, SFTPlan)
        return self.run.plan


def build_sft_components(run: RunConfig, device: Device, ranks: RankInfo) -> SFTComponents:
    plan = run.plan
    assert isinstance(plan, SFTPlan)
    data, trainer = plan.data, plan.trainer
    tokenizer = load_tokenizer(
        data.tokenizer,
        trust_remote_code=plan.model.trust_remote_code,
        custom_chat_template=plan.model.custom_chat_template,
    )
    options = RenderOptions(
        messages_key=data.messages_key,
        max_length=data.max_length,
        truncation=data.truncation,
        apply_chat_template_kwargs=dict(data.apply_chat_template_kwargs),
    )
    train = load_sft_examples(data.train_files, tokenizer, options, data.train_max_samples)
    val = (
        load_sft_examples(data.val_files, tokenizer, options, data.val_max_samples)
        if data.val_files
        else []
    )
    # verl shuffles SFT data every epoch (DistributedSampler); kuberl seeds it with trainer.seed.
    sampler = PromptBatchSampler(len(train), data.train_batch_size, shuffle=True, seed=trainer.seed)
    total = trainer.total_training_steps or sampler.steps_per_epoch * trainer.total_epochs
    spec = replace(
        actor_model_spec(plan),
        native_varlen=plan.use_remove_padding and device.has_native_varlen,
    )
    sp = build_ulysses_group(plan.placement.sp_size, device.type)
    model = _build_model(plan, spec, device, ranks, sp)
    optimizer = build_optimizer(model, plan.optim)  # type: ignore[arg-type]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return SFTComponents(
        run=run,
        device=device,
        ranks=ranks,
        tokenizer=tokenizer,
        pad_id=pad,
        train_data=train,
        val_data=val,
        sampler=sampler,
        spec=spec,
        model=model,
        optimizer=optimizer,
        lr_scheduler=build_lr_scheduler(optimizer, plan.optim, total),  # type: ignore[arg-type]
        total_training_steps=total,
        sp=sp,
    )


def _build_model(
    plan: SFTPlan, spec: ModelSpec, device: Device, ranks: RankInfo, sp: UlyssesGroup
) -> nn.Module:
    """Sharded like the actor: meta build everywhere, rank 0 reads the weights (engine/init.py);
    with the Ulysses attention when `engine.ulysses_sequence_parallel_size` > 1."""
    dtype = torch_dtype(plan.fsdp_config.model_dtype)

    def full() -> nn.Module:
        with torch.random.fork_rng(devices=[]):  # LoRA's fresh weights: the same on every rank
            torch.manual_seed(plan.fsdp_config.seed)
            return build_causal_lm(spec, dtype)

    return build_sharded(
        partial(ulysses_model, sp, SP_KEY, build_causal_lm_empty, spec, dtype),
        partial(ulysses_model, sp, SP_KEY, full),
        plan.fsdp_config,  # type: ignore[arg-type]
        device,
        device.torch_device(ranks.local_rank),
        is_main=ranks.is_main,
    )
