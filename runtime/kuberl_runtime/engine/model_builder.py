"""Hugging Face models for each role, built from `model.path` (+ override_config), before sharding.

Actor/reference: `AutoModelForCausalLM`. Critic: `AutoModelForTokenClassification` with one label
(a value per position). Reward model: `AutoModelForSequenceClassification`. LoRA wraps the actor in
a peft model whose adapters can be switched off to act as the reference without a second copy.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from kuberl_runtime.engine import varlen


@dataclass(frozen=True)
class ModelSpec:
    """What to build: the typed subset of `*.model` that the builder reads."""

    path: str
    override_config: dict[str, Any] = field(default_factory=dict)
    trust_remote_code: bool = False
    external_lib: str | None = None
    enable_gradient_checkpointing: bool = False
    lora_rank: int = 0
    lora_alpha: int = 16
    target_modules: str | list[str] = "all-linear"
    exclude_modules: str | list[str] | None = None
    freeze_vision_tower: bool = False
    """A vision-language model's vision encoder gets no gradients (`actor.freeze_vision_tower`)."""
    lora_adapter_path: str | None = None
    """A saved PEFT adapter to start from instead of a fresh one (`model.lora_adapter_path`)."""
    native_varlen: bool = False
    """Packed forwards on CUDA: torch flash varlen serves them where flash-attn is absent."""


def attn_implementation(spec: ModelSpec) -> str:
    """`override_config.attn_implementation`, else flash-attn 2 where it is installed, else
    torch's own flash varlen kernel for packed forwards on CUDA (`engine/varlen.py`), else SDPA.

    verl defaults to `flash_attention_2`; the CUDA image ships flash-attn, so packed
    (`use_remove_padding`) micro-batches run varlen attention there. On CPU, SDPA with the
    block-diagonal mask transformers derives from the restarting position ids.
    """
    chosen = spec.override_config.get("attn_implementation")
    if chosen:
        return str(chosen)
    if importlib.util.find_spec("flash_attn"):
        return "flash_attention_2"
    return varlen.register() if spec.native_varlen else "sdpa"


def load_config(spec: ModelSpec, **extra: Any) -> Any:
    """The model's config with `override_config` applied (attention: see `attn_implementation`).

    transformers honours the attention kernel only as a constructor argument, never as a plain
    attribute, so it is passed that way and the config then reports the one in use.
    """
    if spec.external_lib:
        importlib.import_module(spec.external_lib)
    config = AutoConfig.from_pretrained(
        spec.path,
        trust_remote_code=spec.trust_remote_code,
        attn_implementation=attn_implementation(spec),
    )
    overrides = {k: v for k, v in spec.override_config.items() if k != "attn_implementation"}
    for key, value in {**overrides, **extra}.items():
        setattr(config, key, value)
    return config


def build_causal_lm(spec: ModelSpec, dtype: torch.dtype = torch.float32) -> nn.Module:
    config = load_config(spec)
    model = causal_lm_class(config).from_pretrained(
        spec.path,
        config=config,
        dtype=dtype,
        trust_remote_code=spec.trust_remote_code,
        attn_implementation=config._attn_implementation,
    )
    return _finish(model, spec)


def build_causal_lm_empty(spec: ModelSpec, dtype: torch.dtype = torch.float32) -> nn.Module:
    """The same model on the meta device: shapes and dtypes, no storage, no checkpoint read.

    Sharded initialisation starts here (every rank shards, then the weights arrive from rank 0);
    the dry run (`kuberl_runtime.dryrun`) builds every size this way.
    """
    return _empty(AutoModelForCausalLM, spec, dtype, "CAUSAL_LM")


def build_value_model_empty(spec: ModelSpec, dtype: torch.dtype = torch.float32) -> nn.Module:
    """`build_value_model` on the meta device (see `build_causal_lm_empty`)."""
    return _empty(
        AutoModelForTokenClassification,
        spec,
        dtype,
        "TOKEN_CLS",
        num_labels=1,
        classifier_dropout=0.0,
    )


def _empty(
    auto: Any, spec: ModelSpec, dtype: torch.dtype, task_type: str, **extra: Any
) -> nn.Module:
    config = load_config(spec, **extra)
    auto = causal_lm_class(config) if auto is AutoModelForCausalLM else auto
    with torch.device("meta"):
        model = auto.from_config(
            config,
            dtype=dtype,
            trust_remote_code=spec.trust_remote_code,
            attn_implementation=config._attn_implementation,
        )
    return _finish(model, spec, task_type=task_type)


def build_value_model(spec: ModelSpec, dtype: torch.dtype = torch.float32) -> nn.Module:
    """A token-classification model with one label: the critic's value per position."""
    config = load_config(spec, num_labels=1, classifier_dropout=0.0)
    model = AutoModelForTokenClassification.from_pretrained(
        spec.path, config=config, dtype=dtype, trust_remote_code=spec.trust_remote_code
    )
    return _finish(model, spec, task_type="TOKEN_CLS")


def build_reward_model(spec: ModelSpec, dtype: torch.dtype = torch.float32) -> nn.Module:
    config = load_config(spec, num_labels=1)
    model = AutoModelForSequenceClassification.from_pretrained(
        spec.path, config=config, dtype=dtype, trust_remote_code=spec.trust_remote_code
    )
    model.requires_grad_(False)
    return model.eval()


def causal_lm_class(config: Any) -> Any:
    """`AutoModelForCausalLM`, or `AutoModelForImageTextToText` for a vision-language model
    that has no causal-LM class (Qwen2-VL, Qwen2.5-VL: text generation conditioned on images)."""
    if type(config) in AutoModelForCausalLM._model_mapping:
        return AutoModelForCausalLM
    if type(config) in AutoModelForImageTextToText._model_mapping:
        return AutoModelForImageTextToText
    return AutoModelForCausalLM


VISION_TOWER_NAMES = ("visual", "vision_tower", "vision_model")


def vision_tower(model: nn.Module) -> nn.Module | None:
    """The vision encoder of a vision-language model (Qwen2.5-VL: `model.visual`), else None."""
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] in VISION_TOWER_NAMES:
            return module
    return None


def _finish(model: nn.Module, spec: ModelSpec, task_type: str = "CAUSAL_LM") -> nn.Module:
    model.config.use_cache = False
    if spec.freeze_vision_tower:
        tower = vision_tower(model)
        if tower is None:
            raise ValueError(
                "actor_rollout_ref.actor.freeze_vision_tower=True but the model has no vision "
                f"tower (none of {', '.join(VISION_TOWER_NAMES)}); set it to False"
            )
        tower.requires_grad_(False)
    if spec.enable_gradient_checkpointing:
        # Non-reentrant checkpointing of every decoder layer (transformers 5.19, as vLLM pins).
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if spec.lora_rank > 0 and spec.lora_adapter_path:
        model = load_lora(model, spec)
    elif spec.lora_rank > 0:
        model = apply_lora(model, spec, task_type)
    return model


def load_lora(model: nn.Module, spec: ModelSpec) -> nn.Module:
    """The saved adapter at `spec.lora_adapter_path`, trainable; its r and alpha must match."""
    from peft import PeftConfig, PeftModel

    assert spec.lora_adapter_path
    saved = PeftConfig.from_pretrained(spec.lora_adapter_path)
    if (saved.r, saved.lora_alpha) != (spec.lora_rank, spec.lora_alpha):
        raise ValueError(
            f"model.lora_adapter_path={spec.lora_adapter_path!r} holds an adapter with r="
            f"{saved.r}, lora_alpha={saved.lora_alpha}; set model.lora_rank={saved.r} and "
            f"model.lora_alpha={saved.lora_alpha} to match it"
        )
    if spec.enable_gradient_checkpointing:
        model.enable_input_require_grads()
    return PeftModel.from_pretrained(model, spec.lora_adapter_path, is_trainable=True)


def apply_lora(model: nn.Module, spec: ModelSpec, task_type: str) -> nn.Module:
    from peft import LoraConfig, get_peft_model

    if spec.enable_gradient_checkpointing:
        model.enable_input_require_grads()
    lora_config = LoraConfig(
        task_type=task_type,
        r=spec.lora_rank,
        lora_alpha=spec.lora_alpha,
        target_modules=spec.target_modules,
        exclude_modules=spec.exclude_modules,
        bias="none",
    )
    return get_peft_model(model, lora_config)


def is_lora(model: nn.Module) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The transformer blocks FSDP2 shards one by one (classes named in `_no_split_modules`)."""
    base = model.get_base_model() if is_lora(model) else model
    names = set(getattr(base, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]
