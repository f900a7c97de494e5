"""The vLLM rollout against a fake of the exact vLLM API it calls (see fake_vllm.py).

What only a GPU can prove (docs/gpu.md): that the real engine accepts these arguments at the
pinned version, that sleep/wake really frees and restores memory, that `load_weights` maps HF
names onto vLLM's fused layers (qkv, gate_up), and what throughput it reaches.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from transformers import AutoTokenizer

from kuberl_api.plan.sections import RolloutPlan
from kuberl_api.plan.standalone import rollout_plan
from kuberl_api.validation import SpecInvalid
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.rollout.vllm import (
    CACHE_TAGS,
    SLEEP_LEVEL,
    buckets,
    build_engine_kwargs,
    build_sampling_kwargs,
    build_vllm_rollout,
    merge_lora,
    tensor_parallel_groups,
)
from kuberl_runtime.testing.tiny import build_tiny_qwen2

REPO = Path(__file__).resolve().parents[3]
TOKENIZER_DIR = REPO / "examples" / "tokenizer" / "arith-tokenizer"
FAKE = Path(__file__).with_name("fake_vllm.py")


@pytest.fixture()
def tiny_model():
    return build_tiny_qwen2(AutoTokenizer.from_pretrained(TOKENIZER_DIR), seed=0)


@pytest.fixture()
def vllm(monkeypatch, tiny_model):
    spec = importlib.util.spec_from_file_location("vllm", FAKE)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "vllm", module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "vllm.platforms", module.platforms)
    module.MODEL_SHAPES.update({k: v.shape for k, v in tiny_model.state_dict().items()})
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    return module


def rollout_config(**overrides: Any) -> RolloutPlan:
    node = {"tensor_model_parallel_size": 1, "log_prob_max_token_len_per_gpu": 16384, **overrides}
    return rollout_plan(node, max_prompt_length=16, max_response_length=6)


def build(vllm, cfg: RolloutPlan, host_model=None, lora_scaling=None):
    return build_vllm_rollout(
        cfg,
        model_path="/models/tiny",
        trust_remote_code=False,
        hf_overrides={},
        eos_ids=[2],
        pad_id=0,
        device=torch.device("cpu"),
        lora_scaling=lora_scaling,
        host_model=host_model,
    )


def test_engine_kwargs_follow_verl_and_pass_engine_kwargs_through(vllm):
    cfg = rollout_config(
        gpu_memory_utilization=0.6,
        max_num_batched_tokens=4096,
        max_num_seqs=64,
        enforce_eager=False,
        enable_chunked_prefill=False,
        load_format="dummy_dtensor",
        engine_kwargs={"vllm": {"cpu_offload_gb": 0, "quantization": None}},
    )
    rollout = build(vllm, cfg)
    (llm,) = vllm.INSTANCES
    assert llm.kwargs == {
        "model": "/models/tiny",
        "tensor_parallel_size": 1,
        "distributed_executor_backend": "external_launcher",
        "dtype": "bfloat16",
        "enforce_eager": False,
        "gpu_memory_utilization": 0.6,
        "disable_custom_all_reduce": True,
        "max_model_len": 22,
        "max_num_batched_tokens": 4096,
        "max_num_seqs": 64,
        "enable_chunked_prefill": False,
        "enable_prefix_caching": True,
        "enable_sleep_mode": True,
        "load_format": "dummy",
        "disable_log_stats": True,
        "trust_remote_code": False,
        "seed": 0,
        "logprobs_mode": "processed_logprobs",  # verl's rollout.logprobs_mode default
        "cpu_offload_gb": 0,  # engine_kwargs.vllm passes through, None values dropped
    }
    assert rollout.llm is llm
    assert llm.calls == [("sleep", SLEEP_LEVEL)]  # free the memory until the first sync
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"


def test_unknown_engine_kwarg_fails_like_vllm(vllm):
    with pytest.raises(TypeError, match="unexpected keyword"):
        build(vllm, rollout_config(engine_kwargs={"vllm": {"no_such_arg": 1}}))


def test_sampling_params_map_from_the_config(vllm):
    sampled = build_sampling_kwargs(
        SamplingParams(response_length=7, temperature=0.7, top_k=0, top_p=0.9), 5, [2, 3]
    )
    assert sampled == {
        "temperature": 0.7,
        "top_k": -1,
        "top_p": 0.9,
        "n": 1,
        "max_tokens": 7,
        "ignore_eos": False,
        "stop_token_ids": [2, 3],
        "seed": 5,
        "detokenize": False,
    }
    greedy = build_sampling_kwargs(
        SamplingParams(response_length=3, do_sample=False, ignore_eos=True, top_k=5), 1, [2]
    )
    assert greedy | {} == {
        "temperature": 0.0,
        "top_k": -1,
        "top_p": 1.0,
        "min_p": 0.0,
        "n": 1,
        "max_tokens": 3,
        "ignore_eos": True,
        "stop_token_ids": [],
        "seed": 1,
        "detokenize": False,
    }
    vllm.SamplingParams(**sampled)  # the real field names
    vllm.SamplingParams(**greedy)


def test_sync_then_generate_follows_the_staged_wake_up(vllm, tiny_model):
    rollout = build(
        vllm,
        rollout_config(),
        host_model=build_tiny_qwen2(AutoTokenizer.from_pretrained(TOKENIZER_DIR), seed=1),
    )
    rollout.bucket_bytes = 64 * 1024
    (llm,) = vllm.INSTANCES
    with pytest.raises(AssertionError, match="asleep"):
        llm.generate([{"prompt_token_ids": [1]}])
    rollout.update_weights(tiny_model.state_dict().items())
    rollout.wake_up()
    prompts = torch.tensor([[0, 0, 5, 6], [7, 8, 9, 10]])
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    params = SamplingParams(response_length=6, ignore_eos=True)
    responses = rollout.generate(prompts, mask, params, seeds=[11, 12])
    rollout.sleep()

    assert llm.calls == [
        ("sleep", SLEEP_LEVEL),
        ("wake_up", ["weights"]),  # weights only, then load
        ("collective_rpc", "reload_weights"),  # one in-place reload takes the whole stream
        ("reset_prefix_cache", None),
        ("wake_up", CACHE_TAGS),  # KV cache right before generating
        ("generate", 2),
        ("sleep", SLEEP_LEVEL),
    ]
    loaded = llm.model.weights
    assert loaded.keys() == tiny_model.state_dict().keys()  # HF names
    for name, tensor in tiny_model.state_dict().items():
        assert loaded[name].dtype == torch.bfloat16
        torch.testing.assert_close(loaded[name], tensor.to(torch.bfloat16))
    for name, tensor in tiny_model.state_dict().items():  # rank 0's host copy follows
        torch.testing.assert_close(rollout.model.state_dict()[name], tensor)
    assert responses.shape == (2, 6) and responses.dtype == torch.long
    # same seed and prompt => same sample, whatever else is in the batch (per-row seeds)
    rollout.wake_up()
    again = rollout.generate(prompts[1:], mask[1:], params, seeds=[12])
    assert torch.equal(again[0], responses[1])


def test_responses_stop_after_eos_and_are_padded(vllm, tiny_model):
    rollout = build(vllm, rollout_config(free_cache_engine=False))
    rollout.update_weights(tiny_model.state_dict().items())
    params = SamplingParams(response_length=6, do_sample=False)
    # greedy in the fake repeats the last prompt token: 2 is the EOS id here
    responses = rollout.generate(torch.tensor([[4, 2]]), torch.ones(1, 2), params, seeds=[0])
    assert responses.tolist() == [[2, 0, 0, 0, 0, 0]]
    (llm,) = vllm.INSTANCES
    assert not [c for c in llm.calls if c[0] in ("sleep", "wake_up")]


def test_log_probs_are_asked_for_and_follow_each_rows_tokens(vllm, tiny_model):
    rollout = build(vllm, rollout_config(free_cache_engine=False))
    rollout.update_weights(tiny_model.state_dict().items())
    params = SamplingParams(response_length=4, do_sample=False)
    prompts, mask = torch.tensor([[4, 2], [4, 5]]), torch.ones(2, 2)
    responses, log_probs = rollout.generate_with_log_probs(prompts, mask, params, seeds=[0, 1])
    assert torch.equal(responses, rollout.generate(prompts, mask, params, seeds=[0, 1]))
    # the fake's log-prob is -0.25 (step + 1); row 0 stops at its first token (EOS 2)
    assert log_probs.tolist() == [[-0.25, 0, 0, 0], [-0.25, -0.5, -0.75, -1.0]]
    assert build_sampling_kwargs(params, 0, [2], log_probs=True)["logprobs"] == 0
    assert "logprobs" not in build_sampling_kwargs(params, 0, [2])


def test_dummy_weights_are_never_used_for_generation(vllm):
    rollout = build(vllm, rollout_config())
    rollout.wake_up()
    with pytest.raises(AssertionError, match="dummy"):
        rollout.generate(torch.tensor([[3]]), torch.ones(1, 1), SamplingParams(2), seeds=[0])


def test_lora_is_merged_into_base_weights_with_hf_names(tiny_model):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    peft_model = get_peft_model(
        tiny_model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    for name, param in peft_model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param)
    merged = dict(merge_lora(peft_model.state_dict().items(), scaling=8 / 4))
    expected = peft_model.merge_and_unload().state_dict()
    assert merged.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(merged[name], expected[name], rtol=1e-5, atol=1e-5)


def test_buckets_respect_the_size_and_keep_order():
    tensors = [(f"t{i}", torch.ones(256)) for i in range(5)]  # 1 KiB each in fp32
    out = list(buckets(tensors, 2 * 512, torch.bfloat16, torch.device("cpu")))
    assert [[n for n, _ in b] for b in out] == [["t0", "t1"], ["t2", "t3"], ["t4"]]
    assert all(t.dtype == torch.bfloat16 for b in out for _, t in b)


def test_tensor_parallel_groups_are_contiguous_like_vllm():
    assert tensor_parallel_groups(8, 2) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert tensor_parallel_groups(4, 4) == [[0, 1, 2, 3]]
    with pytest.raises(ValueError, match="must divide"):
        tensor_parallel_groups(6, 4)


def test_engine_kwargs_are_pure():
    cfg = rollout_config(max_model_len=1024, load_format="safetensors")
    kwargs = build_engine_kwargs(
        cfg,
        model_path="m",
        trust_remote_code=True,
        hf_overrides={"rope_theta": 1e6},
    )
    assert kwargs["max_model_len"] == 1024
    assert kwargs["load_format"] == "safetensors"
    assert kwargs["hf_overrides"] == {"rope_theta": 1e6}


def _run_config(tmp_path, name: str):
    from kuberl_runtime.config import load_run_config
    from tests.runtime.trainer.conftest import base_config, set_key

    config = base_config(tmp_path / "model", tmp_path / "out")
    set_key(config, "actor_rollout_ref.rollout.name", name)
    set_key(config, "data.tokenizer", str(TOKENIZER_DIR))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    return load_run_config(path)


def test_rollout_name_vllm_selects_the_vllm_engine_when_importable(vllm, tmp_path):
    from kuberl_runtime.distributed import RankInfo
    from kuberl_runtime.testing.tiny import save_tiny_model
    from kuberl_runtime.trainer.components import _build_rollout

    save_tiny_model(tmp_path / "model", AutoTokenizer.from_pretrained(TOKENIZER_DIR), seed=0)
    cfg = _run_config(tmp_path, "vllm").plan
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    ranks = RankInfo(rank=0, world_size=1, local_rank=0)
    engine = _build_rollout(cfg, tokenizer, torch.device("cpu"), ranks)
    assert type(engine).__name__ == "VLLMRollout"
    assert vllm.INSTANCES[-1].kwargs["model"] == str(tmp_path / "model")


def test_rollout_name_vllm_without_vllm_is_refused_before_the_run(tmp_path, monkeypatch):
    """An image without vLLM (runtime-cpu) never falls back to another engine in silence."""
    from kuberl_runtime.config import check_runtime

    run = _run_config(tmp_path, "vllm")
    check_runtime(run)  # this environment has vllm
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)  # an image without it
    with pytest.raises(SpecInvalid) as err:
        check_runtime(run)
    (problem,) = err.value.problems
    assert problem.path == "actor_rollout_ref.rollout.name"
    assert problem.message == "vllm is not installed in this runtime"
    assert "rollout.name: hf" in problem.hint
    monkeypatch.undo()
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    hf = _run_config(hf_dir, "hf")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    check_runtime(hf)  # the HF engine needs nothing more
