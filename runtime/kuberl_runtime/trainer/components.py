"""Everything a run needs, built once from the typed config: data, models, engines, rewards."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import AutoTokenizer

from kuberl_api.backend_config import BackendConfig
from kuberl_runtime.config import RunConfig
from kuberl_runtime.data import DatasetOptions, PromptBatchSampler, RLDataset
from kuberl_runtime.device import Device
from kuberl_runtime.distributed import RankInfo
from kuberl_runtime.engine.actor import Actor, ActorSettings
from kuberl_runtime.engine.critic import Critic
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.model_builder import (
    ModelSpec,
    build_causal_lm,
    build_reward_model,
    build_value_model,
)
from kuberl_runtime.reward_model import RewardModelScorer
from kuberl_runtime.rewards import RewardManager, build_reward_manager
from kuberl_runtime.rollout.hf import HFRollout
from kuberl_runtime.rollout.vllm import VLLMRollout, build_vllm_rollout, vllm_available

logger = logging.getLogger(__name__)


@dataclass
class Components:
    run: RunConfig
    device: Device
    ranks: RankInfo
    tokenizer: Any
    train_data: RLDataset
    val_data: RLDataset | None
    sampler: PromptBatchSampler
    actor: Actor
    critic: Critic | None
    rollout: HFRollout | VLLMRollout
    reward_manager: RewardManager
    reward_model: RewardModelScorer | None
    total_training_steps: int

    @property
    def cfg(self) -> BackendConfig:
        return self.run.backend_config


def actor_model_spec(cfg: BackendConfig) -> ModelSpec:
    model = cfg.actor_rollout_ref.model
    return ModelSpec(
        path=model.path,
        override_config=dict(model.override_config),
        trust_remote_code=model.trust_remote_code,
        external_lib=model.external_lib,
        enable_gradient_checkpointing=model.enable_gradient_checkpointing,
        lora_rank=model.lora_rank,
        lora_alpha=model.lora_alpha,
        target_modules=model.target_modules,
        exclude_modules=model.exclude_modules,
    )


def build_components(run: RunConfig, device: Device, ranks: RankInfo) -> Components:
    cfg = run.backend_config
    tokenizer = AutoTokenizer.from_pretrained(
        cfg.data.tokenizer, trust_remote_code=cfg.data.trust_remote_code
    )
    train_data = _dataset(cfg, cfg.data.train_files, tokenizer, cfg.data.train_max_samples)
    val_data = (
        _dataset(cfg, cfg.data.val_files, tokenizer, cfg.data.val_max_samples)
        if cfg.data.val_files
        else None
    )
    sampler = PromptBatchSampler(
        len(train_data), cfg.data.train_batch_size, shuffle=cfg.data.shuffle, seed=cfg.data.seed
    )
    total = cfg.trainer.total_training_steps or sampler.steps_per_epoch * cfg.trainer.total_epochs
    return Components(
        run=run,
        device=device,
        ranks=ranks,
        tokenizer=tokenizer,
        train_data=train_data,
        val_data=val_data,
        sampler=sampler,
        actor=_build_actor(cfg, device, ranks, total),
        critic=_build_critic(cfg, device, ranks, total) if cfg.needs_critic else None,
        rollout=_build_rollout(cfg, tokenizer, device.torch_device(ranks.local_rank), ranks),
        reward_manager=build_reward_manager(
            cfg.custom_reward_function.path,
            cfg.custom_reward_function.name,
            cfg.custom_reward_function.reward_kwargs,
            batch=True if cfg.reward_model.reward_manager == "batch" else None,
        ),
        reward_model=(
            _build_reward_model(cfg, device.torch_device(ranks.local_rank))
            if cfg.reward_model.enable
            else None
        ),
        total_training_steps=total,
    )


def _dataset(cfg: BackendConfig, files: Any, tokenizer: Any, max_samples: int) -> RLDataset:
    data = cfg.data
    options = DatasetOptions(
        prompt_key=data.prompt_key,
        reward_fn_key=data.reward_fn_key,
        max_prompt_length=data.max_prompt_length,
        truncation=data.truncation,
        filter_overlong_prompts=data.filter_overlong_prompts,
        return_raw_chat=data.return_raw_chat,
        apply_chat_template_kwargs=dict(data.apply_chat_template_kwargs),
    )
    dataset = RLDataset.from_files(files, tokenizer, options)
    if 0 < max_samples < len(dataset):
        rng = np.random.default_rng(data.seed)
        keep = rng.choice(len(dataset), max_samples, replace=False) if data.shuffle else None
        indices = sorted(keep.tolist()) if keep is not None else range(max_samples)
        dataset = RLDataset([dataset[i] for i in indices])
    return dataset


def _seeded_build(seed: int, build: Any, *args: Any) -> nn.Module:
    # Every rank builds the same initial weights (value heads, LoRA) before FSDP shards them.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build(*args)


def _build_actor(cfg: BackendConfig, device: Device, ranks: RankInfo, total: int) -> Actor:
    arr = cfg.actor_rollout_ref
    spec = actor_model_spec(cfg)
    model = _seeded_build(arr.actor.fsdp_config.seed, build_causal_lm, spec)
    model = apply_fsdp(
        model.to(device.torch_device(ranks.local_rank)), arr.actor.fsdp_config, device
    )
    ref_model = None
    if cfg.needs_reference and spec.lora_rank == 0:
        ref_spec = replace(spec, enable_gradient_checkpointing=False)
        ref_model = build_causal_lm(ref_spec).requires_grad_(False)
        ref_model = apply_fsdp(
            ref_model.to(device.torch_device(ranks.local_rank)), arr.ref.fsdp_config, device
        )
    settings = ActorSettings(
        temperature=arr.rollout.temperature,
        use_remove_padding=bool(arr.actor.use_remove_padding),
        rollout_n=arr.rollout.n,
        world_size=ranks.world_size,
        total_training_steps=total,
    )
    return Actor(model, arr.actor, settings, ref_model=ref_model)


def _build_critic(cfg: BackendConfig, device: Device, ranks: RankInfo, total: int) -> Critic:
    critic_cfg = cfg.critic
    model_cfg = critic_cfg.model
    spec = ModelSpec(
        path=model_cfg.path or cfg.actor_rollout_ref.model.path,
        override_config=dict(model_cfg.override_config),
        trust_remote_code=model_cfg.trust_remote_code,
        external_lib=model_cfg.external_lib,
        enable_gradient_checkpointing=model_cfg.enable_gradient_checkpointing,
        lora_rank=model_cfg.lora_rank,
        lora_alpha=model_cfg.lora_alpha,
        target_modules=model_cfg.target_modules,
    )
    model = _seeded_build(model_cfg.fsdp_config.seed, build_value_model, spec)
    model = apply_fsdp(
        model.to(device.torch_device(ranks.local_rank)), model_cfg.fsdp_config, device
    )
    return Critic(
        model,
        critic_cfg,
        rollout_n=cfg.actor_rollout_ref.rollout.n,
        world_size=ranks.world_size,
        total_training_steps=total,
    )


def _build_rollout(
    cfg: BackendConfig, tokenizer: Any, device: torch.device, ranks: RankInfo
) -> HFRollout | VLLMRollout:
    rollout = cfg.actor_rollout_ref.rollout
    use_vllm = rollout.name == "vllm" and vllm_available()
    if rollout.name != "hf" and not use_vllm:
        logger.warning(
            "rollout.name=%s is not available in this runtime (vllm not installed); using the "
            "Hugging Face engine",
            rollout.name,
        )
    spec = replace(actor_model_spec(cfg), enable_gradient_checkpointing=False)
    if use_vllm and not ranks.is_main:
        with torch.device("meta"):  # only rank 0 keeps a host copy (checkpoint metadata, export)
            model = build_causal_lm(spec)
    else:
        model = _seeded_build(0, build_causal_lm, spec)
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    eos_ids = eos if isinstance(eos, list) else [eos if eos is not None else tokenizer.eos_token_id]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    if not use_vllm:
        return HFRollout(model.to(device), eos_ids=eos_ids, pad_id=pad_id)
    return build_vllm_rollout(
        rollout,
        model_path=spec.path,
        prompt_length=rollout.prompt_length or cfg.data.max_prompt_length,
        response_length=rollout.response_length or cfg.data.max_response_length,
        trust_remote_code=spec.trust_remote_code,
        hf_overrides=spec.override_config,
        eos_ids=eos_ids,
        pad_id=pad_id,
        device=device,
        lora_scaling=spec.lora_alpha / spec.lora_rank if spec.lora_rank > 0 else None,
        host_model=model if ranks.is_main else None,
    )


def _build_reward_model(cfg: BackendConfig, device: torch.device) -> RewardModelScorer:
    rm = cfg.reward_model
    assert rm.model.path, "reward_model.enable needs reward_model.model.path"
    spec = ModelSpec(path=rm.model.path, trust_remote_code=rm.model.trust_remote_code)
    return RewardModelScorer(build_reward_model(spec).to(device), rm.micro_batch_size_per_gpu)
