"""Prompt batches (repeated n× interleaved, one uid per prompt) and rollout sharded over ranks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from kuberl_runtime.data import PromptSample
from kuberl_runtime.distributed import RankInfo, all_gather_rows
from kuberl_runtime.engine.mrope import MRopeSpec, batch_mrope_positions
from kuberl_runtime.engine.multimodal import MROPE_POSITION_IDS, MULTI_MODAL_INPUTS, image_grids
from kuberl_runtime.rollout.base import RolloutEngine, SamplingParams, build_response_batch
from kuberl_runtime.trainer.batch import Batch

VALIDATION_STREAM = 1_000_000_000
ROLLOUT_LOG_PROBS = "rollout_log_probs"


def row_seed(seed: int, stream: int, row: int) -> int:
    """A sampling seed for one row of one step, independent of world size and batching."""
    return int(np.random.SeedSequence([seed, stream, row]).generate_state(1)[0])


def prompt_batch(
    samples: Sequence[PromptSample], n: int, prompt_length: int, pad_id: int, uid_prefix: str
) -> Batch:
    """Left-padded (rows, P) prompts, each sample repeated `n` times next to itself."""
    rows = [(i, sample) for i, sample in enumerate(samples) for _ in range(n)]
    prompts = torch.full((len(rows), prompt_length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), prompt_length), dtype=torch.long)
    for row, (_, sample) in enumerate(rows):
        ids = sample.prompt_ids[-prompt_length:]
        prompts[row, prompt_length - len(ids) :] = torch.tensor(ids, dtype=torch.long)
        mask[row, prompt_length - len(ids) :] = 1
    return Batch(
        {"prompts": prompts, "prompt_mask": mask},
        {
            "uid": [f"{uid_prefix}:{i}" for i, _ in rows],
            "sample": [sample for _, sample in rows],
        },
    )


def generate_sharded(
    prompts: Batch,
    rollout: RolloutEngine,
    params: SamplingParams,
    *,
    ranks: RankInfo,
    seed: int,
    stream: int,
    eos_ids: Sequence[int],
    pad_id: int,
    mrope: MRopeSpec | None = None,
    log_probs: bool = False,
) -> Batch:
    """Each rank generates a contiguous share of the rows; every rank gets the whole batch back.
    `log_probs`: the batch also holds the engine's `rollout_log_probs` (0 off the response mask).

    Image prompts (a vision-language policy, `mrope` its position rule): each row's images go to
    the rollout, and the batch gains the rows' `multi_modal_inputs` and `mrope_position_ids`
    for the training and log-prob forwards."""
    num_rows = len(prompts)
    per_rank = -(-num_rows // ranks.world_size)
    padded = list(range(num_rows)) + [0] * (per_rank * ranks.world_size - num_rows)
    mine = padded[ranks.rank * per_rank : (ranks.rank + 1) * per_rank]
    seeds = [row_seed(seed, stream, row) for row in mine]
    index = torch.tensor(mine, dtype=torch.long)
    vision = [sample.vision for sample in prompts.objects["sample"]]
    has_images = any(v is not None for v in vision)
    extra = {"vision": [vision[row] for row in mine]} if has_images else {}
    rollout.wake_up()
    local_prompts = (prompts["prompts"][index], prompts["prompt_mask"][index], params, seeds)
    if log_probs:
        local, local_log_probs = rollout.generate_with_log_probs(*local_prompts, **extra)
    else:
        local = rollout.generate(*local_prompts, **extra)
    rollout.sleep()
    responses = all_gather_rows(local)[:num_rows]
    batch = build_response_batch(
        prompts["prompts"],
        prompts["prompt_mask"],
        responses,
        eos_ids=eos_ids,
        pad_id=pad_id,
        ignore_eos=params.ignore_eos,
    )
    batch.objects = dict(prompts.objects)
    if log_probs:
        gathered = all_gather_rows(local_log_probs)[:num_rows]
        batch[ROLLOUT_LOG_PROBS] = gathered * batch["response_mask"]
    if has_images:
        assert mrope is not None, "image prompts need a vision-language policy"
        inputs = [v.inputs if v is not None else None for v in vision]
        batch.objects[MULTI_MODAL_INPUTS] = inputs
        batch[MROPE_POSITION_IDS] = batch_mrope_positions(
            batch["input_ids"], batch["attention_mask"], image_grids(inputs), mrope
        )
    return batch
