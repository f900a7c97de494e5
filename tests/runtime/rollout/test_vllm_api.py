"""The vLLM API the rollout calls, checked against the real, installed vLLM (CPU: no engine).

Constructing `vllm.LLM` needs a GPU; its classes, signatures and argument dataclasses do not. So
these tests prove, at the pinned version, that every engine argument kuberl passes is a real
`EngineArgs` field, that the sampling fields build a real `SamplingParams`, that `sleep`,
`wake_up`, `collective_rpc` and `generate` take what the rollout passes, and that the
weight-reload path (`Worker.reload_weights`, `LLM.reset_prefix_cache`) exists. The fake
(`fake_vllm.py`), kept for what needs a GPU (sleep/wake state, load order, generation), is
checked to mirror the same signatures.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

import pytest

from kuberl_api.plan.standalone import rollout_plan
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.rollout.vllm import (
    CACHE_TAGS,
    RELOAD_METHOD,
    SLEEP_LEVEL,
    WEIGHTS_TAGS,
    build_engine_kwargs,
    build_sampling_kwargs,
)

vllm = pytest.importorskip("vllm", reason="the `vllm` extra is part of the test environment")
REPO = Path(__file__).resolve().parents[3]


def _fake():
    spec = importlib.util.spec_from_file_location(
        "fake_vllm_mirror", Path(__file__).with_name("fake_vllm.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _pins() -> dict[str, str]:
    lines = (REPO / "images" / "versions.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def _engine_arg_names() -> set[str]:
    return {field.name for field in dataclasses.fields(vllm.EngineArgs)}


def test_installed_vllm_is_the_images_vllm():
    assert vllm.__version__ == _pins()["VLLM_VERSION"]


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"load_format": "dummy_dtensor", "enforce_eager": False, "max_model_len": 4096},
        {"engine_kwargs": {"vllm": {"cpu_offload_gb": 0, "kv_cache_memory_bytes": 1 << 30}}},
    ],
)
def test_every_engine_kwarg_is_a_real_engine_arg(overrides, tmp_path):
    # A local model directory: with HF_HUB_OFFLINE=1 (other conftests set it) vLLM would treat a
    # path that does not exist as a hub repo id and refuse it.
    (tmp_path / "config.json").write_text('{"model_type": "qwen2"}')
    kwargs = build_engine_kwargs(
        rollout_plan(
            {"log_prob_max_token_len_per_gpu": 16384, **overrides},
            max_prompt_length=512,
            max_response_length=1024,
        ),
        model_path=str(tmp_path),
        trust_remote_code=False,
        hf_overrides={"rope_theta": 1e6},
    )
    assert set(kwargs) <= _engine_arg_names(), set(kwargs) - _engine_arg_names()
    assert kwargs["distributed_executor_backend"] == "external_launcher"
    args = vllm.EngineArgs(**kwargs)  # the dataclass LLM(**kwargs) builds; no device needed
    assert args.distributed_executor_backend == "external_launcher"
    assert args.enable_sleep_mode is True
    assert args.load_format in ("dummy", "auto", "safetensors")


def test_external_launcher_is_a_known_executor_backend():
    from vllm.config.parallel import DistributedExecutorBackend

    assert "external_launcher" in DistributedExecutorBackend.__args__


def test_unknown_engine_kwarg_is_refused_by_the_real_engine_args():
    with pytest.raises(TypeError, match="unexpected keyword"):
        vllm.EngineArgs(model="m", swap_space=4)  # gone from EngineArgs in this vLLM


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(response_length=7, temperature=0.7, top_k=0, top_p=0.9),
        SamplingParams(response_length=3, do_sample=False, ignore_eos=True, top_k=5),
        SamplingParams(response_length=5, temperature=1.0, top_k=20),
    ],
)
def test_sampling_kwargs_build_a_real_sampling_params(params):
    kwargs = build_sampling_kwargs(params, seed=(1 << 64) - 1, eos_ids=[2, 3])
    real = vllm.SamplingParams(**kwargs)
    for key, value in kwargs.items():
        if key == "top_k" and value == -1:  # "disabled": vLLM normalises -1 to 0
            assert real.top_k in (-1, 0)
        else:
            assert getattr(real, key) == value, key
    assert set(kwargs) <= set(vllm.SamplingParams.__struct_fields__)


def test_sleep_and_wake_up_take_the_levels_and_tags_the_rollout_uses():
    sleep = inspect.signature(vllm.LLM.sleep).parameters
    assert list(sleep)[1:] == ["level", "mode"]
    assert SLEEP_LEVEL in (1, 2)
    assert list(inspect.signature(vllm.LLM.wake_up).parameters)[1:] == ["tags"]
    # The allocator's deferrable tags and the engine core's scheduling tag.
    cumem = inspect.getsource(importlib.import_module("vllm.v1.worker.gpu_worker"))
    assert 'tag="weights"' in cumem and 'tag="kv_cache"' in cumem
    core = inspect.getsource(importlib.import_module("vllm.v1.engine.core"))
    assert '"scheduling" in tags' in core
    assert set(WEIGHTS_TAGS) | set(CACHE_TAGS) == {"weights", "kv_cache", "scheduling"}


def test_collective_rpc_and_generate_take_what_the_rollout_passes():
    rpc = inspect.signature(vllm.LLM.collective_rpc).parameters
    assert list(rpc)[1:] == ["method", "timeout", "args", "kwargs"]
    gen = inspect.signature(vllm.LLM.generate).parameters
    assert {"prompts", "sampling_params", "use_tqdm"} <= set(gen)
    assert gen["use_tqdm"].kind is inspect.Parameter.KEYWORD_ONLY
    from vllm.inputs.llm import TokensPrompt

    assert "prompt_token_ids" in TokensPrompt.__annotations__


def test_the_weight_reload_path_exists_on_the_real_workers():
    from vllm.v1.worker.cpu_worker import CPUWorker
    from vllm.v1.worker.gpu_worker import Worker

    assert RELOAD_METHOD == "reload_weights"
    assert issubclass(CPUWorker, Worker)  # the CPU engine reloads through the same method
    assert "self.model_runner.reload_weights" in inspect.getsource(Worker.reload_weights)
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    params = inspect.signature(GPUModelRunner.reload_weights).parameters
    assert {"weights_iterator", "is_checkpoint_format"} <= set(params)
    assert "reset_running_requests" in inspect.signature(vllm.LLM.reset_prefix_cache).parameters
    from vllm.platforms.interface import Platform

    assert callable(Platform.is_sleep_mode_available)


def test_the_fake_mirrors_the_real_signatures():
    fake = _fake()
    assert fake.__version__ == vllm.__version__
    assert _engine_arg_names() >= fake.ENGINE_ARGS, fake.ENGINE_ARGS - _engine_arg_names()
    for name in ("sleep", "wake_up", "collective_rpc", "reset_prefix_cache"):
        real = inspect.signature(getattr(vllm.LLM, name)).parameters
        mirror = inspect.signature(getattr(fake.LLM, name)).parameters
        assert list(mirror) == list(real), name
        for param in mirror:
            assert mirror[param].default == real[param].default, (name, param)
    real_gen = inspect.signature(vllm.LLM.generate).parameters
    for param in inspect.signature(fake.LLM.generate).parameters.values():
        assert param.name in real_gen and real_gen[param.name].kind == param.kind, param.name
    real_fields = set(vllm.SamplingParams.__struct_fields__)
    assert {f.name for f in dataclasses.fields(fake.SamplingParams)} <= real_fields
