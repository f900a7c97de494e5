"""Plan pieces shared by the RL run plan (`build.py`) and the SFT plan (`sft.py`)."""

from __future__ import annotations

from kuberl_api.backend_config.actor import CheckpointConfig, FSDPConfig, OptimConfig
from kuberl_api.backend_config.model import ModelConfig
from kuberl_api.plan.sections import CheckpointPlan, FSDPPlan, ModelPlan, OptimPlan


def file_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def str_or_list(value: str | list[str]) -> str | list[str]:
    return value if isinstance(value, str) else list(value)


def model_section(model: ModelConfig) -> ModelPlan:
    """The trained model: the actor's (actor_rollout_ref.model) or the SFT job's (model)."""
    return ModelPlan(
        path=model.path,
        override_config=dict(model.override_config),
        trust_remote_code=model.trust_remote_code,
        external_lib=model.external_lib or "",
        enable_gradient_checkpointing=model.enable_gradient_checkpointing,
        lora_rank=model.lora_rank,
        lora_alpha=model.lora_alpha,
        target_modules=str_or_list(model.target_modules),
        exclude_modules=file_list(model.exclude_modules),
        custom_chat_template=model.custom_chat_template or "",
        lora_adapter_path=model.lora_adapter_path or "",
    )


def optim_section(optim: OptimConfig) -> OptimPlan:
    """The one place the schedule is decided: lr_scheduler_type, else the deprecated
    warmup_style (validation refuses the two set differently), else verl's constant."""
    return OptimPlan(
        lr=float(optim.lr),
        lr_warmup_steps=optim.lr_warmup_steps if optim.lr_warmup_steps is not None else -1,
        lr_warmup_steps_ratio=float(optim.lr_warmup_steps_ratio),
        lr_scheduler_type=optim.lr_scheduler_type or optim.warmup_style or "constant",
        min_lr_ratio=float(optim.min_lr_ratio),
        num_cycles=float(optim.num_cycles),
        weight_decay=float(optim.weight_decay),
        betas=[float(b) for b in optim.betas],
        optimizer=optim.optimizer,
    )


def fsdp_section(fsdp: FSDPConfig, *, trained: bool = True) -> FSDPPlan:
    """`trained`: the model has an optimizer (actor, critic, SFT model)."""
    return FSDPPlan(
        param_offload=fsdp.param_offload,
        optimizer_offload=trained and fsdp.optimizer_offload,
        offload_policy=fsdp.offload_policy,
        reshard_after_forward=fsdp.reshard_after_forward,
        fsdp_size=fsdp.fsdp_size,
        dtype=fsdp.mixed_precision.param_dtype or fsdp.dtype,
        reduce_dtype=fsdp.mixed_precision.reduce_dtype if trained else "fp32",
        seed=fsdp.seed,
        model_dtype=fsdp.model_dtype,
    )


def checkpoint_section(checkpoint: CheckpointConfig) -> CheckpointPlan:
    save = list(checkpoint.save_contents)
    load = checkpoint.load_contents
    return CheckpointPlan(
        save_contents=save, load_contents=list(load) if load is not None else save
    )
