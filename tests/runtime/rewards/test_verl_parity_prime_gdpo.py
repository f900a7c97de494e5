"""The `prime` and `gdpo` reward managers equal verl 0.9.1's on shared inputs: prime's scores
(verl's `run_reward_scoring`, a process pool: numbers, a sequence's first element, 0 for a call
that raises), gdpo's scores and extra info (verl's `GDPORewardManager.run_single`, which passes
`experiment_name` in extra_info and records numeric results as `acc`)."""

from __future__ import annotations

import asyncio

import numpy as np
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.gdpo import GDPORewardManager
from verl.workers.reward_manager.prime import run_reward_scoring

from kuberl_runtime.rewards.function import RewardFunction
from kuberl_runtime.rewards.manager import RewardManager

SOURCES = ["a", "b", "c", "d", "e"]
TEXTS = ["12", "7", "boom", "345", "x"]
TRUTHS = ["12", "8", "1", "345", "x"]
INFOS = [{"k": i} for i in range(5)]


def mixed_score(data_source, solution_str, ground_truth, extra_info):
    """A number, a bool, a (score, detail) pair, or an error, by data source."""
    if solution_str == "boom":
        raise ValueError("cannot score")
    if data_source == "b":
        return solution_str == ground_truth
    if data_source == "d":
        return (float(len(solution_str)), "detail")
    return float(solution_str == ground_truth) + 0.5 * extra_info["k"]


def named_score(data_source, solution_str, ground_truth, extra_info):
    """Numeric for some rows, a dict for others; reads the experiment's name."""
    bonus = 0.25 if extra_info.get("experiment_name") == "exp-7" else 0.0
    if data_source in ("a", "c"):
        return float(solution_str == ground_truth) + bonus
    return {"score": 2.0 + bonus, "format_reward": float(len(solution_str))}


def test_prime_scores_equal_verls():
    theirs = run_reward_scoring(mixed_score, TEXTS, TRUTHS, SOURCES, INFOS, num_processes=4)
    manager = RewardManager(RewardFunction(mixed_score), mode="prime")
    ours = manager.score(TEXTS, SOURCES, TRUTHS, INFOS)
    assert ours.scores == theirs == [1.0, 0.0, 0.0, 3.0, 3.0]
    assert ours.extra_info == {}


class _Tokenizer:
    def decode(self, ids, skip_special_tokens=True):
        return TEXTS[int(ids[0])]


def _verl_gdpo(manager: GDPORewardManager, row: int) -> dict:
    data = DataProto.from_dict(
        tensors={
            "prompts": torch.zeros(1, 2, dtype=torch.long),
            "responses": torch.tensor([[row, 0]]),
            "attention_mask": torch.tensor([[1, 1, 1, 0]]),
        },
        non_tensors={
            "reward_model": np.array([{"ground_truth": TRUTHS[row]}], dtype=object),
            "data_source": np.array([SOURCES[row]], dtype=object),
            "extra_info": np.array([dict(INFOS[row])], dtype=object),
        },
    )
    return manager.loop.run_until_complete(manager.run_single(data))


def test_gdpo_scores_and_extra_info_equal_verls():
    config = OmegaConf.create({"trainer": {"experiment_name": "exp-7"}})
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # verl's manager takes the current loop (another may be closed)
    try:
        verl_manager = GDPORewardManager(config, _Tokenizer(), named_score)
        theirs = [_verl_gdpo(verl_manager, row) for row in range(len(TEXTS))]
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    manager = RewardManager(RewardFunction(named_score), mode="gdpo", experiment_name="exp-7")
    ours = manager.score(TEXTS, SOURCES, TRUTHS, INFOS)
    assert ours.scores == [t["reward_score"] for t in theirs]
    for row, result in enumerate(theirs):
        for key, value in result["reward_extra_info"].items():
            if key != "score":  # kept as the score itself, not an extra
                assert ours.extra_info[key][row] == value, (key, row)
    assert ours.extra_info["acc"] == [1.25, None, 0.25, None, None]
    assert [{"k": i} for i in range(5)] == INFOS  # the rows' own extra_info untouched
