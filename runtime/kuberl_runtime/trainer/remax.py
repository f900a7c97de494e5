"""ReMax's baseline (`adv_estimator: remax`): one greedy response per prompt, scored.

verl 0.9.1 generates, besides the n sampled responses, one response per prompt with sampling off,
scores it with the same reward (reward model included) and stores the sequence score as
`reward_baselines`, repeated next to each of the prompt's n rows. The estimator itself lives in
`kuberl_runtime.algorithms` (`remax`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import torch

from kuberl_runtime.data import PromptSample
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.generation import prompt_batch

REMAX_STREAM = 2_000_000_000
"""Sampling-seed stream of the baseline rollouts (greedy needs none; kept apart all the same)."""


def greedy_params(params: SamplingParams) -> SamplingParams:
    return replace(params, do_sample=False)


def reward_baselines(
    samples: Sequence[PromptSample],
    n: int,
    *,
    prompt_length: int,
    pad_id: int,
    generate: Callable[[Batch], Batch],
    score: Callable[[Batch], torch.Tensor],
) -> torch.Tensor:
    """(len(samples) * n,) the greedy response's sequence score, one per training row.

    `generate` runs the rollout greedily on a prompt batch; `score` gives (rows, L) token scores.
    """
    prompts = prompt_batch(samples, 1, prompt_length, pad_id, "remax")
    greedy = generate(prompts)
    per_prompt = score(greedy).sum(-1)
    return per_prompt.repeat_interleave(n)
