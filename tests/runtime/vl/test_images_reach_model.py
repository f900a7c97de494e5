"""Images reach both the rollout and the training forward of a tiny Qwen2.5-VL.

The same prompt with two different pictures gets different log-probs (padded and packed, equal to
each other and to transformers' own forward) and different samples from the HF rollout with the
same seeds; the rollout's greedy tokens are the argmax of the training forward's logits, so the
rollout and the trainer see the same images at the same positions.
"""

from __future__ import annotations

import random

import torch

from kuberl_runtime.data import DatasetOptions, RLDataset
from kuberl_runtime.distributed import RankInfo
from kuberl_runtime.engine.logprob import forward_responses
from kuberl_runtime.engine.mrope import MRopeSpec
from kuberl_runtime.engine.multimodal import (
    MROPE_POSITION_IDS,
    MULTI_MODAL_INPUTS,
    join_multi_modal,
)
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.rollout.hf import HFRollout
from kuberl_runtime.testing.dots import build_dot_rows, draw_dots, png_bytes
from kuberl_runtime.trainer.generation import generate_sharded, prompt_batch

RESPONSE = 12


class _LogitsRecorder(torch.nn.Module):
    """The model, keeping the logits of every call (what the rollout samples from)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config
        self.logits: list[torch.Tensor] = []

    def forward(self, **kwargs):
        out = self.model(**kwargs)
        self.logits.append(out.logits.detach())
        return out


def _dataset(tmp_path, processor, **options):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = build_dot_rows(2, seed=3)
    rows[1]["prompt"] = rows[0]["prompt"]  # same question, different picture
    rows[1]["images"] = [{"bytes": png_bytes(draw_dots(4, random.Random(9)))}]
    path = tmp_path / "dots.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    opts = DatasetOptions(max_prompt_length=64, **options)
    return RLDataset.from_files(path, processor.tokenizer, opts, processor)


def _generate(dataset, model, processor, params):
    pad = processor.tokenizer.pad_token_id
    eos = [processor.tokenizer.eos_token_id]
    rollout = HFRollout(model, eos_ids=eos, pad_id=pad)
    prompts = prompt_batch(dataset.batch([0, 1]), 2, 64, pad, "t")
    return generate_sharded(
        prompts,
        rollout,
        params,
        ranks=RankInfo(rank=0, world_size=1, local_rank=0),
        seed=0,
        stream=1,
        eos_ids=eos,
        pad_id=pad,
        mrope=MRopeSpec.of(model.config),
    )


def test_prompts_count_their_vision_tokens(tmp_path, processor):
    dataset = _dataset(tmp_path, processor)
    image_token = processor.image_token_id
    for sample in dataset.samples:
        assert sample.prompt_ids.count(image_token) == 4  # 56x56: 4x4 patches, merged 2x2
        assert sample.vision.inputs["image_grid_thw"].tolist() == [[1, 4, 4]]
    assert dataset.samples[0].prompt_ids == dataset.samples[1].prompt_ids


def test_lazy_inputs_equal_cached(tmp_path, processor):
    cached = _dataset(tmp_path, processor)
    lazy = _dataset(tmp_path, processor, return_multi_modal_inputs=False)
    assert lazy.samples[0].vision.inputs is None
    for a, b in zip(cached.batch([0, 1]), lazy.batch([0, 1]), strict=True):
        assert torch.equal(a.vision.inputs["pixel_values"], b.vision.inputs["pixel_values"])


def test_different_images_different_rollouts_and_log_probs(tmp_path, processor, vl_model):
    dataset = _dataset(tmp_path, processor)
    # The rollout, same prompt tokens, two pictures: two different next-token distributions.
    tokenizer = processor.tokenizer
    recorder = _LogitsRecorder(vl_model)
    rollout = HFRollout(recorder, eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id)
    prompts = prompt_batch(dataset.batch([0, 1]), 1, 64, tokenizer.pad_token_id, "t")
    rollout.generate(
        prompts["prompts"],
        prompts["prompt_mask"],
        SamplingParams(1, do_sample=False),
        [0, 0],
        vision=[s.vision for s in prompts.objects["sample"]],
    )
    assert torch.equal(prompts["prompts"][0], prompts["prompts"][1])
    first = recorder.logits[0][:, -1]
    assert (first[0] - first[1]).abs().max() > 1e-3
    # Rows 0, 1: picture A; rows 2, 3: picture B.
    greedy = _generate(dataset, vl_model, processor, SamplingParams(RESPONSE, do_sample=False))
    images = join_multi_modal(greedy.objects[MULTI_MODAL_INPUTS])
    tensors = greedy.tensors
    with torch.no_grad():
        padded = forward_responses(vl_model, tensors, multi_modal=images)
        packed = forward_responses(vl_model, tensors, multi_modal=images, use_remove_padding=True)
        logits = vl_model(
            input_ids=tensors["input_ids"],
            attention_mask=tensors["attention_mask"],
            position_ids=tensors[MROPE_POSITION_IDS].transpose(0, 1),
            **images,
        ).logits[:, -RESPONSE - 1 : -1]
    mask = greedy["response_mask"].bool()
    torch.testing.assert_close(packed.log_probs[mask], padded.log_probs[mask])
    # The rollout's greedy tokens are what the training forward predicts (same images, positions).
    assert torch.equal(logits.argmax(-1)[mask], greedy["responses"][mask])
    # ...and the rollout's first logits are the training forward's at the last prompt token.
    torch.testing.assert_close(logits[[0, 2], 0], first, rtol=1e-4, atol=1e-4)
    # Same prompt and response tokens, another picture: other log-probs.
    swapped = greedy.select([0, 1, 2, 3])
    swapped.tensors["responses"] = greedy["responses"][[0, 1, 0, 1]]
    swapped.tensors["input_ids"] = greedy["input_ids"][[0, 1, 0, 1]]
    swapped.tensors["attention_mask"] = greedy["attention_mask"][[0, 1, 0, 1]]
    swapped.tensors["response_mask"] = greedy["response_mask"][[0, 1, 0, 1]]
    swapped.tensors[MROPE_POSITION_IDS] = greedy[MROPE_POSITION_IDS][[0, 1, 0, 1]]
    with torch.no_grad():
        other = forward_responses(vl_model, swapped.tensors, multi_modal=images)
    row_mask = swapped["response_mask"][0].bool()
    assert not torch.allclose(other.log_probs[0][row_mask], other.log_probs[2][row_mask])
