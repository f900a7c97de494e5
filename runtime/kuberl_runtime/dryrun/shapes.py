"""Published model dimensions (config.json of each release) and accelerator memory.

The dry run needs only a model's config, never its weights: a `config.json` at the model path,
or one of these shapes by name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kuberl_api.accelerators import MEMORY_GIB

_QWEN2 = {
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_act": "silu",
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}
MODEL_SHAPES: dict[str, dict[str, Any]] = {
    "Qwen2.5-0.5B": {
        **_QWEN2,
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    "Qwen2.5-1.5B": {
        **_QWEN2,
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    "Qwen2.5-7B": {
        **_QWEN2,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
    "Qwen2.5-32B": {
        **_QWEN2,
        "hidden_size": 5120,
        "intermediate_size": 27648,
        "num_hidden_layers": 64,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
    "Qwen3-8B": {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 40960,
        "torch_dtype": "bfloat16",
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "tie_word_embeddings": False,
    },
}

# Memory one accelerator offers to a process, GiB, per accelerator model (kuberl_api.accelerators).
ACCELERATORS: dict[str, float] = MEMORY_GIB


def model_config(name_or_path: str) -> dict[str, Any]:
    """A known shape by name, a `config.json` file, or a model directory holding one."""
    if name_or_path in MODEL_SHAPES:
        return dict(MODEL_SHAPES[name_or_path])
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        known = ", ".join(MODEL_SHAPES)
        raise FileNotFoundError(
            f"no model config at {name_or_path}: pass --model-config with a config.json (or the "
            f"model directory), or one of the known shapes: {known}"
        )
    return json.loads(path.read_text())
