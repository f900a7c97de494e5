"""Ulysses SP on a vision-language model equals one rank: a tiny Qwen2.5-VL, 2 gloo ranks as one
SP group (dp 1 x sp 2), against rank 0 running the same image rows on a plain model.

Each row's prompt carries a dot picture; the split of the sequence cuts an image's tokens in two
(asserted), so one rank holds part of an image's merged features and the other the rest. The
actor's old log-probs and entropy, and after one update its loss metrics and the full gradients
of every weight, vision encoder included, must equal the one-rank oracle's to fp32 tolerance,
for packed (`use_remove_padding`, a token budget, gradient checkpointing) and padded rows.
"""

from __future__ import annotations

import datetime
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from kuberl_api.plan.standalone import actor_plan
from kuberl_runtime.data import DatasetOptions, RLDataset
from kuberl_runtime.device import Device
from kuberl_runtime.engine import actor as actor_module
from kuberl_runtime.engine.actor import Actor, ActorSettings
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.micro import MicroBatching
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm
from kuberl_runtime.engine.mrope import MRopeSpec, batch_mrope_positions
from kuberl_runtime.engine.multimodal import MROPE_POSITION_IDS, MULTI_MODAL_INPUTS, image_grids
from kuberl_runtime.engine.ulysses import (
    UlyssesGroup,
    build_ulysses_group,
    padded_length,
    use_ulysses_attention,
)
from kuberl_runtime.rollout.base import build_response_batch
from kuberl_runtime.testing.dots import QUESTION, build_dot_rows
from kuberl_runtime.testing.tiny_vl import VISION_TOKENS, build_tiny_vl_processor
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.generation import prompt_batch
from support.sp_oracle import assert_close, capture_grads, mean_over_ranks, on_rank0
from support.warm_python import script_env, warm_python

pytestmark = pytest.mark.runtime

CPU = Device("cpu")
SP = 2
ROWS, PROMPT, RESPONSE = 4, 96, 8
SUFFIXES = (10, 0, 17, 5)  # text tokens after each row's question: the split cuts an image
MICRO = {  # packed: one token budget; padded: fixed micro-batches
    True: {"use_dynamic_bsz": True, "ppo_max_token_len_per_gpu": 400},
    False: {"ppo_micro_batch_size_per_gpu": 4},
}
ORACLE_MICRO = {"use_dynamic_bsz": False, "ppo_micro_batch_size_per_gpu": 2}  # no collectives


def write_rows(path: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = build_dot_rows(ROWS, seed=5)
    for row, suffix in zip(rows, SUFFIXES, strict=True):
        row["prompt"] = [{"role": "user", "content": QUESTION + "1" * suffix}]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _batch(processor, parquet: str, spec: MRopeSpec) -> Batch:
    """The image rows, random responses (two ending early) and the update's inputs."""
    tokenizer = processor.tokenizer
    options = DatasetOptions(max_prompt_length=PROMPT)
    dataset = RLDataset.from_files(parquet, tokenizer, options, processor)
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    prompts = prompt_batch(dataset.batch(list(range(ROWS))), 1, PROMPT, pad, "t")
    gen = torch.Generator().manual_seed(0)
    first_vision = min(tokenizer.convert_tokens_to_ids(list(VISION_TOKENS)))
    responses = torch.randint(3, first_vision, (ROWS, RESPONSE), generator=gen)
    responses[0, 3], responses[2, 5] = eos, eos
    batch = build_response_batch(
        prompts["prompts"], prompts["prompt_mask"], responses, eos_ids=[eos], pad_id=pad
    )
    inputs = [sample.vision.inputs for sample in prompts.objects["sample"]]
    batch.objects[MULTI_MODAL_INPUTS] = inputs
    batch[MROPE_POSITION_IDS] = batch_mrope_positions(
        batch["input_ids"], batch["attention_mask"], image_grids(inputs), spec
    )
    mask = batch["response_mask"]
    batch["advantages"] = torch.randn(mask.shape, generator=gen) * 3 * mask
    batch["old_log_probs"] = (-torch.rand(mask.shape, generator=gen) * 4 - 4) * mask
    return batch


def _split_cuts_an_image(batch: Batch, image_token: int, packed: bool) -> bool:
    """Whether the SP split of the forward's sequence falls between two tokens of one image."""
    valid = batch["attention_mask"].bool()
    ids = batch["input_ids"][valid][None] if packed else batch["input_ids"]
    half = padded_length(ids.shape[1], UlyssesGroup(None, SP, 0)) // SP
    return bool(((ids[:, half - 1] == image_token) & (ids[:, half] == image_token)).any())


def _oracle(spec, node, processor, parquet, packed):
    """One rank, a plain model, fixed micro-batches: what the SP actor must reproduce."""
    model = build_causal_lm(spec)
    batch = _batch(processor, parquet, MRopeSpec.of(model.config))
    settings = ActorSettings(1.0, packed, 1, world_size=1, total_training_steps=1)
    oracle = Actor(model, actor_plan({**node, **ORACLE_MICRO}), settings)
    steps = capture_grads(actor_module)
    return {
        **oracle.compute_log_prob(batch, MicroBatching(2, False), calculate_entropy=True),
        "metrics": oracle.update_policy(batch),
        "grads": steps[0],
    }


def _check(model_dir: str, processor, parquet: str, sp, packed: bool) -> None:
    node = {
        "ppo_mini_batch_size": ROWS,
        "ppo_epochs": 1,
        "loss_agg_mode": "token-mean",
        "entropy_coeff": 0.01,
        **MICRO[packed],
    }
    spec = ModelSpec(path=model_dir)
    want = on_rank0(lambda: _oracle(spec, node, processor, parquet, packed))

    # Packed: the layers are recomputed in backward (gradient checkpointing), collectives too.
    model = build_causal_lm(replace(spec, enable_gradient_checkpointing=packed))
    use_ulysses_attention(model)
    batch = _batch(processor, parquet, MRopeSpec.of(model.config))
    assert _split_cuts_an_image(batch, model.config.image_token_id, packed)
    plan = actor_plan(node)
    model = apply_fsdp(model, plan.fsdp_config, CPU)
    settings = ActorSettings(1.0, packed, 1, world_size=1, total_training_steps=1, sp=sp)
    actor = Actor(model, plan, settings)

    mask = batch["response_mask"].bool()
    budget = MicroBatching(ROWS, False, sp_size=SP)
    got = actor.compute_log_prob(batch, budget, calculate_entropy=True)
    for key in ("old_log_probs", "entropys"):
        assert_close(got[key][mask], want[key][mask], f"{key} (packed={packed})")
    steps = capture_grads(actor_module)
    metrics = actor.update_policy(batch)
    for key in ("actor/pg_loss", "actor/entropy"):
        assert_close(mean_over_ranks(metrics[key][0]), want["metrics"][key][0], key)
    assert steps[0].keys() == want["grads"].keys()
    vision = [name for name in want["grads"] if ".visual." in f".{name}"]
    assert vision and all(want["grads"][name].abs().sum() > 0 for name in vision)
    for name, grad in steps[0].items():
        assert_close(grad, want["grads"][name], f"grad {name} (packed={packed})")


def _rank(rank: int, store: str, model_dir: str, parquet: str) -> None:
    torch.set_num_threads(1)
    # A rank that fails leaves its peer waiting in a collective: it gives up after a minute.
    dist.init_process_group(
        "gloo",
        init_method=f"file://{store}",
        rank=rank,
        world_size=SP,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        sp = build_ulysses_group(SP, "cpu")
        processor = build_tiny_vl_processor()
        for packed in (True, False):
            _check(model_dir, processor, parquet, sp, packed)
    finally:
        dist.destroy_process_group()


def test_vl_sequence_parallel_equals_one_rank(tmp_path):
    from kuberl_runtime.testing.tiny_vl import save_tiny_vl

    model_dir = save_tiny_vl(tmp_path / "tiny-vl")
    parquet = write_rows(tmp_path / "dots.parquet")
    env = script_env()
    args = [str(tmp_path / "store"), str(model_dir), str(parquet)]
    ranks = [
        warm_python().start([__file__, str(rank), *args], env, merge_stderr=True)
        for rank in range(SP)
    ]
    outputs = [process.communicate(timeout=300)[0] for process in ranks]
    failed = [
        f"rank {rank}:\n{output[-3000:]}"
        for rank, (process, output) in enumerate(zip(ranks, outputs, strict=True))
        if process.returncode != 0
    ]
    assert not failed, "\n".join(failed)


if __name__ == "__main__":
    rank_, store_, model_dir_, parquet_ = sys.argv[1:]
    _rank(int(rank_), store_, model_dir_, parquet_)
