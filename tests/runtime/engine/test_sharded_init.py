"""Sharded initialisation gives the same model as loading the checkpoint everywhere."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch.distributed.tensor import DTensor

from kuberl_api.plan.standalone import fsdp_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.init import build_sharded
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm, build_causal_lm_empty
from tests.runtime.engine.conftest import fixed_batch

pytestmark = pytest.mark.usefixtures("process_group")
CPU = Device("cpu")


def _full(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def test_sharded_init_equals_loading_everywhere(tiny_model_path, tokenizer):
    spec = ModelSpec(path=str(tiny_model_path), enable_gradient_checkpointing=True)
    reference = apply_fsdp(build_causal_lm(spec), fsdp_plan(), CPU)
    sharded = build_sharded(
        partial(build_causal_lm_empty, spec),
        partial(build_causal_lm, spec),
        fsdp_plan(),
        CPU,
        torch.device("cpu"),
        is_main=True,
    )
    assert not any(p.device.type == "meta" for p in sharded.parameters())
    expected = reference.state_dict()
    for name, value in sharded.state_dict().items():
        torch.testing.assert_close(_full(value), _full(expected[name]), rtol=0, atol=0)
    rotary = dict(reference.named_buffers())
    for name, buffer in sharded.named_buffers():  # recomputed, not left uninitialised
        torch.testing.assert_close(buffer, rotary[name], rtol=0, atol=0)
    batch = fixed_batch(tokenizer).tensors
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "position_ids")}
    with torch.no_grad():
        torch.testing.assert_close(sharded(**inputs).logits, reference(**inputs).logits)
