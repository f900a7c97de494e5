"""ReMax's baseline: one greedy rollout per prompt, its score repeated over the prompt's n rows."""

from __future__ import annotations

import torch

from kuberl_runtime.data import PromptSample
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.trainer.remax import greedy_params, reward_baselines


def test_baseline_is_the_greedy_score_repeated_per_prompt() -> None:
    samples = [
        PromptSample(index=i, prompt_ids=[5 + i, 6], data_source="x", ground_truth=None)
        for i in range(3)
    ]
    seen = []

    def generate(prompts):
        seen.append(prompts)
        return prompts

    def score(batch):
        # (rows, L) token scores: the prompt's first token id on the last position.
        scores = torch.zeros(len(batch), 4)
        scores[:, -1] = batch["prompts"][:, -2].float()
        return scores

    baselines = reward_baselines(
        samples, 2, prompt_length=4, pad_id=0, generate=generate, score=score
    )
    assert len(seen[0]) == 3  # one greedy response per prompt, not per sampled row
    assert baselines.tolist() == [5.0, 5.0, 6.0, 6.0, 7.0, 7.0]
    params = SamplingParams(response_length=8, temperature=0.7)
    assert greedy_params(params).greedy and greedy_params(params).temperature == 0.7
