"""The rollout hands the caching allocator's free memory back before every vLLM wake-up."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from kuberl_api.plan.standalone import rollout_plan
from kuberl_runtime.rollout import vllm as rollout_vllm

FAKE = Path(__file__).with_name("fake_vllm.py")


def test_cache_is_emptied_before_each_wake_up(monkeypatch):
    spec = importlib.util.spec_from_file_location("vllm", FAKE)
    fake = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    spec.loader.exec_module(fake)
    monkeypatch.setitem(sys.modules, "vllm.platforms", fake.platforms)
    events: list[str] = []
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "empty_cache", lambda: events.append("empty_cache"))
    rollout = rollout_vllm.build_vllm_rollout(
        rollout_plan(
            {"tensor_model_parallel_size": 1, "log_prob_max_token_len_per_gpu": 16384},
            max_prompt_length=4,
            max_response_length=4,
        ),
        model_path="/models/m",
        trust_remote_code=False,
        hf_overrides={},
        eos_ids=[2],
        pad_id=0,
        device=torch.device("cpu"),
        lora_scaling=None,
        host_model=None,
    )
    (llm,) = fake.INSTANCES
    real_wake = llm.wake_up
    monkeypatch.setattr(llm, "wake_up", lambda tags=None: (events.append("wake"), real_wake(tags)))
    rollout.wake_up()  # weights, then KV cache
    rollout.sleep()
    rollout.wake_up()
    assert events == ["empty_cache", "wake"] * 4
