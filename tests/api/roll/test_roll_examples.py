"""ROLL's nine FSDP2 RLVR examples (their keys in roll_fsdp2_examples.yaml) over the minimal
config: each validates, or is refused only at reward workers kuberl cannot run, with the reason;
without those workers every one validates. Also each reward worker's fate on its own."""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.roll import validate, with_keys

EXAMPLES: dict[str, dict] = yaml.safe_load(
    (Path(__file__).parent / "roll_fsdp2_examples.yaml").read_text()
)
RUNNABLE_REWARD = "MathRuleRewardWorker"
VALIDATE_AS_WRITTEN = {
    "ascend_examples/qwen3_30b_rlvr_fsdp2.yaml",
    "ascend_examples/qwen3_8b_rlvr_fsdp2.yaml",
    "qwen3-30BA3B-rlvr_fsdp2/rlvr_config.yaml",
    "qwen3-30BA3B-rlvr_fsdp2/rlvr_config_ep.yaml",
}


def merged(base: dict, overlay: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "rewards":
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def refused_workers(example: dict) -> set[str]:
    rewards = example.get("rewards") or {}
    return {name for name, w in rewards.items() if RUNNABLE_REWARD not in w["worker_cls"]}


def test_the_fixture_holds_the_nine_examples():
    assert len(EXAMPLES) == 9
    assert all(
        e["actor_train"]["strategy_args"]["strategy_name"] == "fsdp2_train"
        for e in EXAMPLES.values()
    )


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_validates_or_is_refused_only_at_reward_workers(base, name):
    example = EXAMPLES[name]
    result = validate(merged(base, example))
    refused = refused_workers(example)
    assert {p.path for p in result.errors} == {f"rewards.{w}.worker_cls" for w in refused}
    assert (name in VALIDATE_AS_WRITTEN) == (not refused)
    for problem in result.errors:
        assert "remove rewards." in problem.hint and "custom_reward_function" in problem.hint


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_without_unrunnable_workers_validates(base, name):
    example = copy.deepcopy(EXAMPLES[name])
    for worker in refused_workers(example):
        del example["rewards"][worker]
    result = validate(merged(base, example))
    assert result.ok, [p.render() for p in result.errors]


def test_counts(base):
    as_written = sum(validate(merged(base, e)).ok for e in EXAMPLES.values())
    assert (as_written, len(EXAMPLES)) == (4, 9)


def _reward(base: dict, worker: dict[str, Any]):
    return validate(with_keys(base, {"rewards": {"w": worker}}))


@pytest.mark.parametrize(
    ("cls", "options", "says"),
    [
        ("code_sandbox_reward_worker.CodeSandboxRewardWorker", {"use_local": True}, "sandbox"),
        (
            "llm_judge_reward_worker.LLMJudgeRewardWorker",
            {"judge_model_type": "inference", "judge_prompt": "p"},
            "LLMJudgeRewardWorker with judge_model_type: inference is not translated",
        ),
        (
            "crossthinkqa_rule_reward_worker.CrossThinkQARuleRewardWorker",
            {"reward_type": "soft", "response_length_penalty_coef": 0.1},
            "reward_type: soft, response_length_penalty_coef: 0.1",
        ),
        (
            "ifeval_rule_reward_worker.GeneralRuleRewardWorker",
            {"reward_type": "hard"},
            "IFEval",
        ),
        ("detection_reward_worker.DetectionRewardWorker", {}, "detection"),
        ("my_rewards.SomethingElse", {}, "cannot run ROLL's reward worker SomethingElse"),
    ],
)
def test_reward_workers_kuberl_cannot_run_are_refused_with_the_way_out(base, cls, options, says):
    worker_cls = f"roll.pipeline.rlvr.rewards.{cls}"
    result = _reward(base, {"worker_cls": worker_cls, "tag_included": ["t1"], **options})
    [problem] = result.errors
    assert problem.path == "rewards.w.worker_cls"
    assert problem.value == worker_cls
    assert says in problem.message
    assert "remove rewards.w and the rows it scores (tag t1)" in problem.hint


def test_math_rule_worker_is_approximated_by_the_data_source_scorer(base):
    cls = "roll.pipeline.rlvr.rewards.math_rule_reward_worker.MathRuleRewardWorker"
    result = _reward(base, {"worker_cls": cls, "model_args": {"model_name_or_path": "/m"}})
    assert result.ok
    assert any(p.path == "rewards.w" and "data_source" in p.message for p in result.warnings)
