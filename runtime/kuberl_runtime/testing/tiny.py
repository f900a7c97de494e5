"""Tiny random-init Qwen2 causal LMs built from a config — for CPU tests and demos, no download."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM


def build_tiny_qwen2_config(
    tokenizer: Any,
    *,
    num_layers: int = 2,
    hidden: int = 64,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate: int | None = None,
    max_position_embeddings: int = 1024,
) -> Qwen2Config:
    """A Qwen2 config sized for a test; vocabulary and special ids come from `tokenizer`."""
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate or 4 * hidden,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )


def build_tiny_qwen2(tokenizer: Any, *, seed: int = 0, **config_kwargs: Any) -> Qwen2ForCausalLM:
    """A random-init `Qwen2ForCausalLM`; the same seed and sizes give the same weights."""
    config = build_tiny_qwen2_config(tokenizer, **config_kwargs)
    # Seed a private generator state so building a model never perturbs the caller's RNG stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    return model.eval()


def save_tiny_model(
    out_dir: str | Path, tokenizer: Any, *, seed: int = 0, **config_kwargs: Any
) -> Path:
    """Write a Hugging Face model directory (config, weights, tokenizer) loadable by path."""
    out = Path(out_dir)
    model = build_tiny_qwen2(tokenizer, seed=seed, **config_kwargs)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
