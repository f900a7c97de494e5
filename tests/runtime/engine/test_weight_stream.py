"""`rollout.layered_summon` has no effect because the weight sync never gathers the whole model.

The stream the trainer hands the rollout engine (trainer/weight_sync.py) gathers each FSDP2
entry only when the engine takes it and keeps no reference to it afterwards: a consumer that
drops each tensor before taking the next finds every earlier gathered tensor freed, so at most
one gathered tensor (plus what the engine itself holds: one LoRA module, one cast bucket) is
alive at a time, which is what verl's layer-by-layer gather (`layered_summon`) buys.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from kuberl_api.plan.standalone import fsdp_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm
from kuberl_runtime.trainer.weight_sync import gathered_weights

pytestmark = pytest.mark.usefixtures("process_group")


def test_each_gathered_tensor_is_freed_before_the_next_is_taken(tiny_model_path):
    torch.manual_seed(0)
    host = build_causal_lm(ModelSpec(path=str(tiny_model_path)))
    expected = {name: tensor.clone() for name, tensor in host.state_dict().items()}
    model = apply_fsdp(host, fsdp_plan(), Device("cpu"))
    earlier: list[weakref.ref] = []
    names = []
    for name, tensor in gathered_weights(model):
        gc.collect()
        assert [ref for ref in earlier if ref() is not None] == [], name
        assert not isinstance(tensor, torch.distributed.tensor.DTensor)
        assert torch.equal(tensor, expected[name]), name
        names.append(name)
        earlier.append(weakref.ref(tensor))
        del tensor
    assert names == list(expected)
