"""Everything a run needs, built once from the typed config: data, models, engines, rewards."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import AutoTokenizer, GenerationConfig

from kuberl_api.plan import RunPlan
from kuberl_api.plan.sft import SFTPlan
from kuberl_runtime.config import RunConfig
from kuberl_runtime.data import DatasetOptions, PromptBatchSampler, RLDataset
from kuberl_runtime.data.custom import custom_dataset, load_dataset_class
from kuberl_runtime.data.tokenizer import load_processor, load_tokenizer
from kuberl_runtime.device import Device
from kuberl_runtime.distributed import RankInfo
from kuberl_runtime.engine.actor import Actor, ActorSettings
from kuberl_runtime.engine.critic import Critic
from kuberl_runtime.engine.fsdp import apply_fsdp, torch_dtype
from kuberl_runtime.engine.init import build_sharded
from kuberl_runtime.engine.model_builder import (
    ModelSpec,
    build_causal_lm,
    build_causal_lm_empty,
    build_value_model,
)
from kuberl_runtime.engine.mrope import MRopeSpec
from kuberl_runtime.engine.ulysses import (
    UlyssesGroup,
    build_ulysses_group,
    ulysses_model,
)
from kuberl_runtime.reward_model import (
    RewardInputs,
    RewardModelScorer,
    build_sharded_reward_model,
)
from kuberl_runtime.rewards import RewardManager, reward_manager_for
from kuberl_runtime.rollout.hf import HFRollout
from kuberl_runtime.rollout.vllm import VLLMRollout, build_vllm_rollout, vllm_available

logger = logging.getLogger(__name__)

ACTOR_SP_KEY = "actor_rollout_ref.actor.ulysses_sequence_parallel_size"


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
    sp: UlyssesGroup
    """This rank's Ulysses sequence-parallel group (size 1: none)."""

    @property
    def plan(self) -> RunPlan:
        return self.run.plan


def actor_model_spec(plan: RunPlan | SFTPlan) -> ModelSpec:
    """The trained model's spec: the actor's, or the SFT job's model (no vision tower frozen)."""
    model = plan.model
    if model.lora_adapter_path and model.lora_rank == 0:
        raise ValueError(
            f"actor_rollout_ref.model.lora_adapter_path={model.lora_adapter_path!r} needs "
            "model.lora_rank > 0: set lora_rank and lora_alpha to the adapter's r and alpha"
        )
    return ModelSpec(
        path=model.path,
        override_config=dict(model.override_config),
        trust_remote_code=model.trust_remote_code,
        external_lib=model.external_lib,
        enable_gradient_checkpointing=model.enable_gradient_checkpointing,
        lora_rank=model.lora_rank,
        lora_alpha=model.lora_alpha,
        target_modules=model.target_modules,
        exclude_modules=model.exclude_modules or None,
        lora_adapter_path=model.lora_adapter_path,
        freeze_vision_tower=isinstance(plan, RunPlan) and plan.actor.freeze_vision_tower,
    )


def build_components(run: RunConfig, device: Device, ranks: RankInfo) -> Components:
    plan = run.plan
    data = plan.data
    tokenizer = load_tokenizer(
        data.tokenizer,
        trust_remote_code=data.trust_remote_code,
        custom_chat_template=plan.model.custom_chat_template,
    )
    processor = _vision_processor(plan, tokenizer)
    train_data = _dataset(plan, data.train_files, tokenizer, data.train_max_samples, processor)
    val_data = (
        _dataset(plan, data.val_files, tokenizer, data.val_max_samples, processor)
        if data.val_files
        else None
    )
    sampler = PromptBatchSampler(
        len(train_data),
        data.gen_batch_size,
        shuffle=data.shuffle,
        seed=data.seed,
        # DAPO's generation batches draw gen_batch_size prompts (train_batch_size when unset)
        batch_key="data.gen_batch_size"
        if data.gen_batch_size != data.train_batch_size
        else "data.train_batch_size",
    )
    trainer = plan.trainer
    total = trainer.total_training_steps or sampler.steps_per_epoch * trainer.total_epochs
    sp = build_ulysses_group(plan.placement.sp_size, device.type)
    return Components(
        run=run,
        device=device,
        ranks=ranks,
        tokenizer=tokenizer,
        train_data=train_data,
        val_data=val_data,
        sampler=sampler,
        actor=_build_actor(plan, device, ranks, total, sp),
        critic=_build_critic(plan, device, ranks, total, sp) if plan.critic.enable else None,
        rollout=_build_rollout(plan, tokenizer, device.torch_device(ranks.local_rank), ranks),
        reward_manager=_reward_manager(plan),
        reward_model=(
            _build_reward_model(plan, tokenizer, device, ranks)
            if plan.reward_model.enable and not plan.reward_judge.enable
            else None
        ),
        total_training_steps=total,
        sp=sp,
    )


def _vision_processor(plan: RunPlan, tokenizer: Any) -> Any:
    """A vision-language policy's processor (image prompts), else None (data/tokenizer.py)."""
    processor = load_processor(
        plan.model.path,
        trust_remote_code=plan.model.trust_remote_code,
        tokenizer=tokenizer,
        custom_chat_template=plan.model.custom_chat_template,
    )
    if processor is not None and plan.critic.enable:
        raise ValueError(
            "critic.enable with a vision-language model is not supported yet (no value-head "
            "class for it); use a critic-free algorithm.adv_estimator such as grpo or rloo"
        )
    return processor


def _dataset(
    plan: RunPlan, files: list[str], tokenizer: Any, max_samples: int, processor: Any = None
) -> RLDataset:
    data = plan.data
    options = DatasetOptions(
        prompt_key=data.prompt_key,
        reward_fn_key=data.reward_fn_key,
        max_prompt_length=data.max_prompt_length,
        truncation=data.truncation,
        filter_overlong_prompts=data.filter_overlong_prompts,
        return_raw_chat=data.return_raw_chat,
        apply_chat_template_kwargs=dict(data.apply_chat_template_kwargs),
        image_key=data.image_key,
        video_key=data.video_key,
        return_multi_modal_inputs=data.return_multi_modal_inputs,
        mm_processor_kwargs=dict(data.mm_processor_kwargs),
    )
    if data.custom_cls.path:
        cls = load_dataset_class(data.custom_cls.path, data.custom_cls.name)
        source = plan.source["data"]
        dataset = custom_dataset(cls, files, tokenizer, options, source, max_samples)
    else:
        dataset = RLDataset.from_files(files, tokenizer, options, processor)
    if 0 < max_samples < len(dataset):
        rng = np.random.default_rng(data.seed)
        keep = rng.choice(len(dataset), max_samples, replace=False) if data.shuffle else None
        indices = sorted(keep.tolist()) if keep is not None else range(max_samples)
        dataset = dataset.subset(indices)
    return dataset


def _seeded_build(seed: int, build: Any, *args: Any) -> nn.Module:
    # Every rank builds the same initial weights (value heads, LoRA) before FSDP shards them.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build(*args)


def with_sp(sp: UlyssesGroup, build: Any, *args: Any) -> nn.Module:
    """`build(*args)`, running the Ulysses attention when sp > 1 (engine/ulysses.py)."""
    return ulysses_model(sp, ACTOR_SP_KEY, build, *args)


def _build_actor(
    plan: RunPlan, device: Device, ranks: RankInfo, total: int, sp: UlyssesGroup
) -> Actor:
    native_varlen = plan.actor.use_remove_padding and device.has_native_varlen
    spec = replace(actor_model_spec(plan), native_varlen=native_varlen)
    dtype = torch_dtype(plan.actor.fsdp_config.model_dtype)
    target = device.torch_device(ranks.local_rank)
    build_full = partial(with_sp, sp, build_causal_lm)
    # Sharded init: meta build on every rank, only rank 0 reads the checkpoint (engine/init.py).
    model = build_sharded(
        partial(with_sp, sp, build_causal_lm_empty, spec, dtype),
        partial(_seeded_build, plan.actor.fsdp_config.seed, build_full, spec, dtype),
        plan.actor.fsdp_config,
        device,
        target,
        is_main=ranks.is_main,
    )
    ref_model = None
    if plan.ref.separate_model:
        ref_spec = replace(spec, enable_gradient_checkpointing=False)
        ref_dtype = torch_dtype(plan.ref.fsdp_config.model_dtype)
        ref_model = build_sharded(
            partial(with_sp, sp, build_causal_lm_empty, ref_spec, ref_dtype),
            partial(with_sp, sp, build_causal_lm, ref_spec, ref_dtype),
            plan.ref.fsdp_config,
            device,
            target,
            is_main=ranks.is_main,
        ).requires_grad_(False)
    settings = ActorSettings(
        temperature=plan.rollout.temperature,
        use_remove_padding=plan.actor.use_remove_padding,
        rollout_n=plan.rollout.n,
        world_size=plan.placement.dp_size,
        total_training_steps=total,
        sp=sp,
        rollout_correction=plan.rollout_correction,
    )
    return Actor(model, plan.actor, settings, ref_model=ref_model)


def _build_critic(
    plan: RunPlan, device: Device, ranks: RankInfo, total: int, sp: UlyssesGroup
) -> Critic:
    critic_cfg = plan.critic
    model_cfg = critic_cfg.model
    spec = ModelSpec(
        path=model_cfg.path,
        override_config=dict(model_cfg.override_config),
        trust_remote_code=model_cfg.trust_remote_code,
        external_lib=model_cfg.external_lib,
        enable_gradient_checkpointing=model_cfg.enable_gradient_checkpointing,
        lora_rank=model_cfg.lora_rank,
        lora_alpha=model_cfg.lora_alpha,
        target_modules=model_cfg.target_modules,
        native_varlen=model_cfg.use_remove_padding and device.has_native_varlen,
    )
    dtype = torch_dtype(model_cfg.fsdp_config.model_dtype)
    # The critic runs in the actor's (dp, sp) layout (validation: its own sp is 1 or the same).
    model = _seeded_build(
        model_cfg.fsdp_config.seed, partial(with_sp, sp, build_value_model), spec, dtype
    )
    model = apply_fsdp(
        model.to(device.torch_device(ranks.local_rank)), model_cfg.fsdp_config, device
    )
    return Critic(
        model,
        critic_cfg,
        rollout_n=plan.rollout.n,
        world_size=plan.placement.dp_size,
        total_training_steps=total,
        sp=sp,
    )


def _build_rollout(
    plan: RunPlan, tokenizer: Any, device: torch.device, ranks: RankInfo
) -> HFRollout | VLLMRollout:
    rollout = plan.rollout
    use_vllm = rollout.name == "vllm"
    if use_vllm and not vllm_available():  # refused before the run (config.check_runtime)
        raise RuntimeError("rollout.name=vllm but vllm is not installed in this runtime")
    spec = replace(actor_model_spec(plan), enable_gradient_checkpointing=False)
    if use_vllm and not ranks.is_main:  # only rank 0 keeps a host copy (metadata, export)
        model = build_causal_lm_empty(spec)  # (from_pretrained refuses the meta device)
        model.generation_config = _generation_config(spec.path, model.generation_config)
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
        trust_remote_code=spec.trust_remote_code,
        hf_overrides=spec.override_config,
        eos_ids=eos_ids,
        pad_id=pad_id,
        device=device,
        lora_scaling=spec.lora_alpha / spec.lora_rank if spec.lora_rank > 0 else None,
        host_model=model if ranks.is_main else None,
        banned_ids=_vision_placeholder_ids(model.config),
    )


def _generation_config(path: str, default: Any) -> Any:
    """generation_config.json as `from_pretrained` reads it (its eos ids stop the rollout), so
    every rank stops on the same tokens; the config's own when the checkpoint has none."""
    try:
        return GenerationConfig.from_pretrained(path)
    except OSError:
        return default


def _vision_placeholder_ids(config: Any) -> list[int]:
    """A VL model's vision tokens, never to be sampled (they would stand for no image)."""
    mrope = MRopeSpec.of(config)
    return mrope.special_ids if mrope is not None else []


def _reward_manager(plan: RunPlan) -> RewardManager:
    """With a generative reward model, its judge engine on this rank (rewards/judge.py)."""
    name = plan.trainer.experiment_name
    if not plan.reward_judge.enable:
        return reward_manager_for(plan.reward_function, name)
    from kuberl_runtime.rewards.judge import build_judge, judged_reward_manager

    service = build_judge(plan.reward_judge, plan.reward_model.trust_remote_code)
    return judged_reward_manager(plan.reward_function, service, name)


def _build_reward_model(
    plan: RunPlan, tokenizer: Any, device: Device, ranks: RankInfo
) -> RewardModelScorer:
    """Sharded with FSDP2 like the reference (`reward_model.model.fsdp_config`), with the
    actor's sharded init: only rank 0 reads the checkpoint (reward_model.py)."""
    rm = plan.reward_model
    assert rm.path, "reward_model.enable needs reward_model.model.path"
    spec = ModelSpec(path=rm.path, trust_remote_code=rm.trust_remote_code)
    dtype, target = torch_dtype(rm.fsdp_config.model_dtype), device.torch_device(ranks.local_rank)
    model = build_sharded_reward_model(
        spec, dtype, rm.fsdp_config, device, target, is_main=ranks.is_main
    )
    # the plan's micro_batch_size_per_gpu 0: the whole shard at once
    return RewardModelScorer(model, rm.micro_batch_size_per_gpu, _reward_inputs(plan, tokenizer))


def _reward_inputs(plan: RunPlan, tokenizer: Any) -> RewardInputs | None:
    """Re-tokenise for the RM when its tokenizer is not the one the inputs were made with."""
    rm = plan.reward_model
    if not rm.input_tokenizer or rm.input_tokenizer == rm.path:
        return None
    source = (
        tokenizer
        if rm.input_tokenizer in (plan.data.tokenizer, plan.model.path)
        else AutoTokenizer.from_pretrained(
            rm.input_tokenizer, trust_remote_code=rm.trust_remote_code
        )
    )
    target = AutoTokenizer.from_pretrained(rm.path, trust_remote_code=rm.trust_remote_code)
    return RewardInputs(source=source, target=target)
