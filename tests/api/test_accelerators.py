"""The accelerator table: its facts, and the enums and lookups every plane derives from it."""

from typing import get_args

import pytest

from kuberl_api import accelerators
from kuberl_api.accelerators import KINDS, kind_of_resource, plan_model
from kuberl_api.backend_config.sft import SFTTrainerConfig
from kuberl_api.backend_config.trainer import TrainerConfig
from kuberl_api.crd import build_crd
from kuberl_api.plan.sections import PlacementPlan
from kuberl_api.platform import Accelerator

# What each accelerator is, written out: a new row of the table gets a row here.
EXPECTED = {
    "cuda": {
        "k8s_resource": "nvidia.com/gpu",
        "backend": "nccl",
        "ray_resource": "GPU",
        "kuberay_maps_resource": True,
        "visible_devices_env": "CUDA_VISIBLE_DEVICES",
        "ray_noset_visible_devices_env": "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",
        "alloc_conf_env": "PYTORCH_CUDA_ALLOC_CONF",
        "env_prefixes": ("NCCL_",),
        "torch_plugin": None,
        "native_varlen": True,
        "mixed_precision": True,
        "cuda_kernels": True,
        "memory_gib": {"H100": 79.1, "H200": 139.8, "A100": 79.1},
        "plan_model": "H100",
    },
    "npu": {
        "k8s_resource": "huawei.com/Ascend910",
        "backend": "hccl",
        "ray_resource": "NPU",
        "kuberay_maps_resource": False,
        "visible_devices_env": "ASCEND_RT_VISIBLE_DEVICES",
        "ray_noset_visible_devices_env": "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES",
        "alloc_conf_env": "PYTORCH_NPU_ALLOC_CONF",
        "env_prefixes": ("HCCL_", "ASCEND_"),
        "torch_plugin": "torch_npu",
        "native_varlen": False,
        "mixed_precision": True,
        "cuda_kernels": False,
        "memory_gib": {"910B": 60.9},
        "plan_model": "910B",
    },
    "cpu": {
        "k8s_resource": None,
        "backend": "gloo",
        "ray_resource": "CPU",
        "kuberay_maps_resource": True,
        "visible_devices_env": "",
        "ray_noset_visible_devices_env": "",
        "alloc_conf_env": "",
        "env_prefixes": (),
        "torch_plugin": None,
        "native_varlen": False,
        "mixed_precision": False,
        "cuda_kernels": False,
        "memory_gib": {},
        "plan_model": None,
    },
}


@pytest.mark.parametrize("device", list(EXPECTED))
def test_each_row_says_what_its_accelerator_is(device):
    kind = KINDS[device]
    assert kind.device == device
    assert {name: getattr(kind, name) for name in EXPECTED[device]} == EXPECTED[device]


def test_the_table_has_exactly_the_expected_rows_in_order():
    assert list(KINDS) == list(EXPECTED)


def test_every_device_literal_is_the_tables_keys():
    devices = ("cuda", "npu", "cpu")
    assert devices == accelerators.DEVICES
    assert get_args(accelerators.DeviceType) == devices
    for model in (TrainerConfig, SFTTrainerConfig):
        assert get_args(model.model_fields["device"].annotation) == (
            accelerators.DeviceType,
            type(None),
        )
    assert get_args(PlacementPlan.model_fields["device"].annotation) == (*devices, "auto")


def test_the_spec_enum_is_the_tables_resources_then_none():
    types = ("nvidia.com/gpu", "huawei.com/Ascend910", "none")
    assert types == accelerators.ACCELERATOR_TYPES
    assert get_args(Accelerator.model_fields["type"].annotation) == types
    crd = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    pools = crd["properties"]["spec"]["properties"]["workerPools"]
    assert pools["items"]["properties"]["accelerator"]["properties"]["type"]["enum"] == list(types)


@pytest.mark.parametrize(
    ("accelerator_type", "device"),
    [("nvidia.com/gpu", "cuda"), ("huawei.com/Ascend910", "npu"), ("none", "cpu")],
)
def test_a_pool_type_finds_its_row(accelerator_type, device):
    assert kind_of_resource(accelerator_type).device == device


def test_an_unknown_pool_type_names_the_known_ones():
    with pytest.raises(KeyError, match=r"'amd.com/gpu' is not one of nvidia.com/gpu, .*none"):
        kind_of_resource("amd.com/gpu")


def test_memory_and_plan_models_come_from_the_rows():
    assert accelerators.MEMORY_GIB == {"H100": 79.1, "H200": 139.8, "A100": 79.1, "910B": 60.9}
    assert accelerators.ENV_PREFIXES == ("NCCL_", "HCCL_", "ASCEND_")
    assert [plan_model(d) for d in ("cuda", "npu", "cpu", "auto")] == [
        "H100",
        "910B",
        "H100",
        "H100",
    ]
    assert accelerators.PLAN_FALLBACK_MODEL in accelerators.MEMORY_GIB
