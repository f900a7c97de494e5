"""Ulysses SP over a packed row: after the all-to-all, a model built with a varlen kernel runs
it over the gathered position ids (each sequence attends within itself), as verl runs flash-attn
varlen; SDPA models keep the dense mask. Two gloo ranks (a file store, no port) with a CPU
stand-in for the varlen kernel: per-sequence causal SDPA, split where positions restart."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, Qwen2Config, Qwen2ForCausalLM

from kuberl_runtime.engine import varlen
from kuberl_runtime.engine.ulysses import ULYSSES_ATTENTION, use_ulysses_attention
from support.warm_python import script_env, warm_python

SEGMENTS = "test_segment_sdpa"


def segment_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kw):
    """A varlen kernel's contract on CPU: (1, H, T, D) in, (1, T, H, D) out, grouped KV heads."""
    cu_seqlens, _ = varlen.cu_seqlens_of(kw["position_ids"])
    bounds = cu_seqlens.tolist()
    parts = [
        F.scaled_dot_product_attention(
            query[..., a:b, :], key[..., a:b, :], value[..., a:b, :],
            is_causal=True, scale=scaling, enable_gqa=True,
        )
        for a, b in itertools.pairwise(bounds)
    ]  # fmt: skip
    return torch.cat(parts, dim=2).transpose(1, 2), None


def _rank(rank: int, store_path: str) -> None:
    import torch.distributed as dist

    from kuberl_runtime.engine.ulysses import UlyssesGroup, ulysses_attention

    dist.init_process_group("gloo", store=dist.FileStore(store_path, 2), rank=rank, world_size=2)
    AttentionInterface.register(SEGMENTS, segment_sdpa)
    group = UlyssesGroup(group=dist.group.WORLD, size=2, rank=rank)
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 12, 8), torch.randn(1, 2, 12, 8), torch.randn(1, 2, 12, 8)
    positions = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2]])  # sequences of 5, 4, 3
    full = segment_sdpa(None, q, k, v, None, position_ids=positions)[0]
    mine = slice(6 * rank, 6 * rank + 6)
    local = {"position_ids": positions[:, mine], "ulysses_group": group}
    for kernel in (SEGMENTS, None):  # the varlen kernel, then SDPA with the dense mask
        args = (q[:, :, mine], k[:, :, mine], v[:, :, mine], None)
        out = ulysses_attention(None, *args, **local, packed_kernel=kernel)[0]
        torch.testing.assert_close(out, full[:, mine])
    print("rank", rank, "ok")
    dist.destroy_process_group()


def test_packed_kernel_and_dense_mask_agree_with_per_sequence_attention(tmp_path: Path):
    store = tmp_path / "store"
    procs = [
        warm_python().start([__file__, str(rank), str(store)], script_env(), True)
        for rank in (0, 1)
    ]
    outputs = [proc.communicate(timeout=180)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    assert all(f"rank {rank} ok" in out for rank, out in enumerate(outputs)), outputs


def _tiny(attn_implementation: str) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2,
    )  # fmt: skip
    return Qwen2ForCausalLM._from_config(config, attn_implementation=attn_implementation)


def test_a_varlen_model_keeps_its_kernel_for_packed_rows_and_sdpa_keeps_the_mask():
    AttentionInterface.register(SEGMENTS, segment_sdpa)
    packed = _tiny(SEGMENTS)
    use_ulysses_attention(packed)
    assert packed.config._attn_implementation == f"{ULYSSES_ATTENTION}_over_{SEGMENTS}"
    fa2_named = _tiny(varlen.register())
    use_ulysses_attention(fa2_named)
    assert "flash" not in fa2_named.config._attn_implementation
    dense = _tiny("sdpa")
    use_ulysses_attention(dense)
    assert dense.config._attn_implementation == ULYSSES_ATTENTION


if __name__ == "__main__":
    _rank(int(sys.argv[1]), sys.argv[2])
