from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from kuberl_runtime.rewards import (
    RewardError,
    RewardFunction,
    RewardManager,
    build_reward_manager,
    decode_responses,
)
from kuberl_runtime.rewards.placement import place_scores

TOKENIZER_DIR = Path(__file__).resolve().parents[3] / "examples" / "tokenizer" / "arith-tokenizer"


@dataclass
class Sample:
    data_source: str
    ground_truth: str | None
    extra_info: dict[str, Any] = field(default_factory=dict)


def test_builtin_scores_per_data_source() -> None:
    manager = RewardManager()
    output = manager.score(
        ["#### 3", r"\boxed{0.5}", "#### 4"],
        ["kuberl/arith", "HuggingFaceH4/MATH-500", "openai/gsm8k"],
        ["3", r"\frac12", "5"],
    )
    assert output.scores == [1.0, 1.0, 0.0]
    assert output.extra_info == {}


def test_score_samples_reads_sample_metadata() -> None:
    samples = [Sample("kuberl/arith", "7"), Sample("kuberl/arith", "7")]
    assert RewardManager().score_samples(samples, ["#### 7", "#### 8"]).scores == [1.0, 0.0]


def test_dict_results_keep_extra_keys_as_lists() -> None:
    def scorer(data_source, solution_str, ground_truth, extra_info):
        result = {"score": len(solution_str), "pred": solution_str}
        if solution_str == "bb":
            result["acc"] = True
        return result

    output = RewardManager(RewardFunction(scorer)).score(["a", "bb"], ["d", "d"], ["", ""])
    assert output.scores == [1.0, 2.0]
    assert all(isinstance(s, float) for s in output.scores)
    assert output.extra_info == {"pred": ["a", "bb"], "acc": [None, True]}


@pytest.mark.parametrize(
    ("result", "pattern"),
    [({"acc": 1.0}, "without 'score'"), ("1.0", "returned '1.0'"), (None, "returned None")],
)
def test_bad_results_are_reported(result: Any, pattern: str) -> None:
    manager = RewardManager(RewardFunction(lambda **kw: result, description="'bad' in r.py"))
    with pytest.raises(RewardError, match=pattern):
        manager.score(["x"], ["d"], ["1"])


def test_bool_and_int_results_become_floats() -> None:
    manager = RewardManager(RewardFunction(lambda **kw: kw["solution_str"] == "y"))
    assert manager.score(["y", "n"], ["d", "d"], ["", ""]).scores == [1.0, 0.0]


def test_mismatched_input_lengths_are_rejected() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        RewardManager().score(["a", "b"], ["kuberl/arith"], ["1", "2"])


def test_build_reward_manager_loads_custom_function(write_reward_file) -> None:
    path = write_reward_file(
        "def compute_score(data_source, solution_str, ground_truth, extra_info, w=1.0):\n"
        "    return w * (solution_str == ground_truth)\n"
    )
    manager = build_reward_manager(path, reward_kwargs={"w": 3.0})
    assert manager.score(["a", "b"], ["any/source"] * 2, ["a", "a"]).scores == [3.0, 0.0]
    assert build_reward_manager(None).score(["#### 1"], ["kuberl/arith"], ["1"]).scores == [1.0]


def test_decode_responses_drops_special_tokens() -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    ids = tokenizer("#### 12", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert decode_responses(tokenizer, [ids, ids[:2]]) == ["#### 12", tokenizer.decode(ids[:2])]


def test_place_scores_puts_each_score_on_the_last_valid_token() -> None:
    placed = place_scores([1.0, -0.5, 2.0], [3, 1, 4], width=4)
    expected = torch.tensor([[0.0, 0.0, 1.0, 0.0], [-0.5, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0]])
    assert placed.dtype == torch.float32
    assert torch.equal(placed, expected)


@pytest.mark.parametrize("lengths", [[0, 2], [2, 5]])
def test_place_scores_rejects_empty_or_too_long_responses(lengths: list[int]) -> None:
    with pytest.raises(ValueError, match=r"in \[1, 4\]"):
        place_scores([1.0, 1.0], lengths, width=4)
