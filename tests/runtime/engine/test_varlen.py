"""Packed forwards on CUDA without flash-attn select torch's flash varlen kernel (engine/varlen.py).

The kernel itself runs only on CUDA: tests/gpu/test_cuda_varlen.py checks it there against SDPA.
"""

from __future__ import annotations

import pytest
import torch

from kuberl_runtime.device import Device
from kuberl_runtime.engine.model_builder import (
    ModelSpec,
    attn_implementation,
    build_causal_lm_empty,
)
from kuberl_runtime.engine.varlen import TORCH_VARLEN, cu_seqlens_of, torch_varlen_attention


def test_sequence_boundaries_come_from_restarting_position_ids():
    positions = torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2, 3]])
    cu_seqlens, longest = cu_seqlens_of(positions)
    assert cu_seqlens.tolist() == [0, 3, 5, 9]
    assert cu_seqlens.dtype == torch.int32
    assert longest == 4


def test_a_row_that_does_not_start_a_sequence_is_refused():
    with pytest.raises(ValueError, match="start every sequence at 0"):
        cu_seqlens_of(torch.tensor([[3, 4, 0, 1]]))


@pytest.mark.parametrize(
    ("native_varlen", "override", "expected"),
    [
        (True, None, TORCH_VARLEN),
        (False, None, "sdpa"),
        (True, "eager", "eager"),  # the user's override_config.attn_implementation wins
    ],
)
def test_the_model_reports_the_kernel_chosen(tiny_model_path, native_varlen, override, expected):
    spec = ModelSpec(
        path=str(tiny_model_path),
        override_config={"attn_implementation": override} if override else {},
        native_varlen=native_varlen,
    )
    assert attn_implementation(spec) == expected  # no flash-attn in the test environment
    model = build_causal_lm_empty(spec)
    assert model.config._attn_implementation == expected
    assert model.model.layers[0].self_attn.config._attn_implementation == expected


def test_only_cuda_has_the_kernel():
    assert Device("cuda").has_native_varlen
    assert not Device("cpu").has_native_varlen
    assert not Device("npu").has_native_varlen


def test_padded_or_cached_calls_are_not_served():
    q = torch.zeros(2, 4, 8, 16)
    with pytest.raises(AssertionError, match="packed forwards only"):
        torch_varlen_attention(None, q, q, q, attention_mask=None, position_ids=torch.zeros(2, 8))
