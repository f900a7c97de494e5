"""`fsdp_config.mixed_precision` (verl's FSDP workers' ``+fsdp_config.mixed_precision.*``):
param_dtype is the parameters' compute dtype (over `dtype`), reduce_dtype the gradient
reduction's, in the FSDP2 policy of an accelerator; the CPU keeps everything in fp32."""

from __future__ import annotations

import pytest
import torch

from kuberl_api.backend_config.actor import FSDPConfig
from kuberl_api.plan.common import fsdp_section
from kuberl_api.plan.standalone import actor_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine.fsdp import mixed_precision_policy


@pytest.mark.parametrize(
    ("node", "param", "reduce"),
    [
        ({}, torch.bfloat16, torch.float32),
        ({"dtype": "float16"}, torch.float16, torch.float32),
        ({"mixed_precision": {"reduce_dtype": "bf16"}}, torch.bfloat16, torch.bfloat16),
        (
            {
                "dtype": "float16",
                "mixed_precision": {"param_dtype": "fp32", "reduce_dtype": "fp16"},
            },
            torch.float32,
            torch.float16,
        ),
    ],
)
def test_the_policy_takes_param_and_reduce_dtypes_from_the_plan(node, param, reduce):
    plan = actor_plan({"fsdp_config": node}).fsdp_config
    policy = mixed_precision_policy(plan, Device("cuda"))
    assert policy is not None
    assert (policy.param_dtype, policy.reduce_dtype) == (param, reduce)
    assert mixed_precision_policy(plan, Device("cpu")) is None


def test_a_frozen_models_plan_reduces_in_fp32_whatever_is_written():
    written = {"mixed_precision": {"param_dtype": "fp16", "reduce_dtype": "bf16"}}
    trained = actor_plan({"fsdp_config": written}).fsdp_config
    assert (trained.dtype, trained.reduce_dtype) == ("fp16", "bf16")
    frozen = fsdp_section(FSDPConfig.model_validate(written), trained=False)
    assert (frozen.dtype, frozen.reduce_dtype) == ("fp16", "fp32")
