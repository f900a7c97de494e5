"""Merged Hugging Face exports: safetensors + config + tokenizer, LoRA folded into the weights.

At the end of training the trainer exports the rollout engine's (full, unsharded) copy of the
policy. `export_checkpoint` does the same offline from a `global_step_N/` directory: it rebuilds
the model from the checkpoint's own `actor/huggingface/` config (no base model download) and
loads the sharded weights with torch.distributed.checkpoint in a single process.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import torch.distributed.checkpoint as dcp
from torch import nn
from transformers import AutoConfig, AutoProcessor, AutoTokenizer

from kuberl_runtime.config import RunConfig
from kuberl_runtime.engine.model_builder import apply_lora, causal_lm_class, is_lora


def write_hf_metadata(model: nn.Module, tokenizer: Any, out_dir: Path) -> None:
    """config.json, generation_config.json and the tokenizer (what verl puts in huggingface/)."""
    base = model.get_base_model() if is_lora(model) else model
    out_dir.mkdir(parents=True, exist_ok=True)
    base.config.save_pretrained(out_dir)
    if getattr(base, "generation_config", None) is not None:
        base.generation_config.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def export_hf_model(model: nn.Module, tokenizer: Any, target: Path) -> Path:
    """Write a loadable model directory at `target` (replaced atomically if it exists)."""
    merged = copy.deepcopy(model).merge_and_unload() if is_lora(model) else model
    tmp = target.with_name(f".tmp-{target.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    merged.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return target


def export_checkpoint(step_dir: str | Path, target: str | Path) -> Path:
    step_dir = Path(step_dir)
    run = RunConfig.from_json((step_dir / "config.json").read_text())
    hf_dir = step_dir / "actor" / "huggingface"
    model_cfg = run.plan.model
    config = AutoConfig.from_pretrained(hf_dir, trust_remote_code=model_cfg.trust_remote_code)
    model = causal_lm_class(config).from_config(config)  # a VL model: its image-text class
    if model_cfg.lora_rank > 0:
        from kuberl_runtime.trainer.components import actor_model_spec

        model = apply_lora(model, actor_model_spec(run.plan), "CAUSAL_LM")
    state = {"model": model.state_dict()}
    dcp.load(state, checkpoint_id=str(step_dir / "actor"))
    model.load_state_dict(state["model"])
    return export_hf_model(model, _processing(hf_dir), Path(target))


PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json")


def _processing(hf_dir: Path) -> Any:
    """A VL checkpoint's processor (saved beside its tokenizer), else the tokenizer."""
    if any((hf_dir / name).exists() for name in PROCESSOR_FILES):
        return AutoProcessor.from_pretrained(hf_dir)
    return AutoTokenizer.from_pretrained(hf_dir)
