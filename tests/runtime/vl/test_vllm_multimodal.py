"""The vLLM rollout's image path against the real, installed vLLM 0.32.0 (no engine: CPU).

Engine args from `engine_kwargs.vllm` (`disable_mm_preprocessor_cache`, `limit_mm_per_prompt`)
build a real `EngineArgs`; each image prompt is a real `TokensPrompt` with `multi_modal_data`
and the processor kwargs; banning the vision tokens builds a real `SamplingParams`; vLLM's
Qwen2.5-VL loads the weights the trainer streams under their transformers names; the rollout
sends every row's pictures with its ids, in row order.
"""

from __future__ import annotations

import dataclasses
import inspect
from types import SimpleNamespace

import pytest
import torch

from kuberl_api.plan.standalone import rollout_plan
from kuberl_runtime.data.vision import VisionPrompt
from kuberl_runtime.engine.mrope import MRopeSpec
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.rollout.vllm import (
    VLLMRollout,
    build_engine_kwargs,
    build_prompt,
    build_sampling_kwargs,
)
from kuberl_runtime.testing.dots import draw_dots

vllm = pytest.importorskip("vllm", reason="the `vllm` extra is part of the test environment")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from kuberl_runtime.testing.tiny_vl import save_tiny_vl

    return str(save_tiny_vl(tmp_path_factory.mktemp("tiny-vl")))


def _engine_kwargs(vllm_kwargs, model_dir):
    plan = rollout_plan(
        {"log_prob_max_token_len_per_gpu": 4096, "engine_kwargs": {"vllm": vllm_kwargs}},
        max_prompt_length=64,
        max_response_length=16,
    )
    return build_engine_kwargs(plan, model_path=model_dir, trust_remote_code=False, hf_overrides={})


def test_the_seed_multimodal_engine_kwargs_build_real_engine_args(model_dir):
    fields = {f.name for f in dataclasses.fields(vllm.EngineArgs)}
    # The ModelArts seed's key is gone from this vLLM: passed as written, LLM() would raise.
    assert "disable_mm_preprocessor_cache" not in fields
    kwargs = _engine_kwargs(
        {"disable_mm_preprocessor_cache": True, "limit_mm_per_prompt": {"image": 2}}, model_dir
    )
    assert set(kwargs) <= fields, set(kwargs) - fields
    args = vllm.EngineArgs(**kwargs)
    assert args.mm_processor_cache_gb == 0
    assert args.limit_mm_per_prompt == {"image": 2}
    kept = _engine_kwargs({"disable_mm_preprocessor_cache": False}, model_dir)
    assert "mm_processor_cache_gb" not in kept and "disable_mm_preprocessor_cache" not in kept


def test_an_image_prompt_is_a_real_tokens_prompt():
    from vllm.inputs.llm import TokensPrompt
    from vllm.multimodal.parse import MultiModalDataParser

    picture = draw_dots(2, __import__("random").Random(0))
    vision = VisionPrompt((picture,), "text", processor_kwargs={"max_pixels": 12544})
    prompt = build_prompt([1, 2, 3], vision)
    assert set(prompt) <= set(TokensPrompt.__annotations__)
    # vLLM's own parser reads it as one image item.
    assert MultiModalDataParser().parse_mm_data(prompt["multi_modal_data"]).get_all_counts() == {
        "image": 1
    }
    assert prompt["multi_modal_data"]["image"] == [picture]
    assert prompt["mm_processor_kwargs"] == {"max_pixels": 12544}
    assert build_prompt([1, 2], None) == {"prompt_token_ids": [1, 2]}


def test_banned_vision_tokens_build_a_real_sampling_params(vl_model):
    banned = MRopeSpec.of(vl_model.config).special_ids
    kwargs = build_sampling_kwargs(SamplingParams(4), seed=3, eos_ids=[2], banned_ids=banned)
    real = vllm.SamplingParams(**kwargs)
    assert real.logit_bias == dict.fromkeys(banned, -100.0)


def test_vllm_qwen2_5_vl_takes_the_trainer_weight_names(vl_model):
    from vllm.model_executor.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration as VL

    assert list(inspect.signature(VL.load_weights).parameters) == ["self", "weights"]
    prefixes = VL.hf_to_vllm_mapper.orig_to_new_prefix
    for name in vl_model.state_dict():
        assert any(name.startswith(p) for p in prefixes), name


class _RecordingLLM:
    def __init__(self) -> None:
        self.prompts: list = []

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True):
        self.prompts = prompts
        return [SimpleNamespace(outputs=[SimpleNamespace(token_ids=[7, 2])]) for _ in prompts]


def test_the_rollout_sends_each_rows_pictures():
    llm = _RecordingLLM()
    rollout = VLLMRollout(
        llm,
        vllm.SamplingParams,
        eos_ids=[2],
        pad_id=0,
        dtype="float32",
        device=torch.device("cpu"),
        free_cache_engine=False,
        banned_ids=[9],
    )
    rng = __import__("random").Random(1)
    pictures = [VisionPrompt((draw_dots(k, rng),), "t") for k in (1, 3)]
    prompts = torch.tensor([[0, 5, 6], [4, 5, 6], [4, 5, 6]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [1, 1, 1]])
    out = rollout.generate(
        prompts, mask, SamplingParams(3), [1, 2, 3], [pictures[0], None, pictures[1]]
    )
    assert [p["prompt_token_ids"] for p in llm.prompts] == [[5, 6], [4, 5, 6], [4, 5, 6]]
    assert llm.prompts[0]["multi_modal_data"]["image"] == list(pictures[0].images)
    assert "multi_modal_data" not in llm.prompts[1]
    assert llm.prompts[2]["multi_modal_data"]["image"] == list(pictures[1].images)
    assert out.tolist() == [[7, 2, 0]] * 3
