"""Qwen2.5's architecture at a width that costs little in the dry run: the same code path per
layer (FSDP2 prefetch, checkpointing, the attention kernels, the sync's buckets) as the real
model, in a fraction of the time. 4 heads over 2 KV heads, hidden 256, 4k vocabulary."""

from __future__ import annotations

from typing import Any

from kuberl_runtime.dryrun import DryRunInput, model_config


def narrow_qwen25(layers: int) -> dict[str, Any]:
    return {
        **model_config("Qwen2.5-0.5B"),
        "num_hidden_layers": layers,
        "hidden_size": 256,
        "intermediate_size": 1024,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 4096,
    }


def narrow_job(layers: int) -> DryRunInput:
    """The narrow model at world 8, packed rows of 256 + 256 tokens, 4 update / 8 log-prob rows."""
    return DryRunInput(
        model_config=narrow_qwen25(layers),
        world_size=8,
        prompt_length=256,
        response_length=256,
        micro_batch_rows=4,
        log_prob_micro_batch_rows=8,
    )
