"""What the runtime refuses at start from the config alone, validation refuses first.

Each case is held two ways: the document through `validate_document` (what `kuberl validate`, the
operator's Validated condition and `kuberl plan` see) and the runtime's own check on the same
settings. They agree both ways: a setting the runtime refuses is an error at validation naming
the key, and a setting validation accepts starts.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from kuberl_api.backend_config import BackendConfig
from kuberl_api.plan import build_run_plan
from kuberl_api.validation import Document, DocumentKind, validate_document
from kuberl_runtime.rewards import default_reward_function
from kuberl_runtime.rewards.errors import RewardError
from kuberl_runtime.trainer.components import actor_model_spec

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
ADAPTER = "/models/adapter"


def _tree(**model: object) -> dict:
    tree = copy.deepcopy(DEMO)
    tree["actor_rollout_ref"]["model"].update(model)
    return tree


def _errors(tree: dict, kind: DocumentKind = DocumentKind.BACKEND_CONFIG) -> list[str]:
    result = validate_document(Document(kind, tree, "", "t.yaml", {}))
    return [p.render() for p in result.errors]


def _runtime_refuses_adapter(tree: dict) -> bool:
    # The plan built without validation's rules: the runtime's check is the one that speaks.
    plan = build_run_plan(BackendConfig.model_validate(tree))
    try:
        actor_model_spec(plan)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize(("rank", "refused"), [(0, True), (8, False)])
def test_lora_adapter_needs_a_rank_at_validation_as_at_start(rank, refused):
    tree = _tree(lora_adapter_path=ADAPTER, lora_rank=rank)
    errors = _errors(tree)
    assert _runtime_refuses_adapter(tree) is refused
    if refused:
        assert any(
            "actor_rollout_ref.model.lora_adapter_path" in e and ADAPTER in e and "lora_rank" in e
            for e in errors
        ), errors
    else:
        assert errors == []


def test_sft_lora_adapter_needs_a_rank():
    sft = yaml.safe_load((ROOT / "examples/demo-sft.yaml").read_text())
    sft["model"].update(lora_adapter_path=ADAPTER, lora_rank=0)
    errors = _errors(sft, DocumentKind.SFT)
    assert any("model.lora_adapter_path" in e and "lora_rank" in e for e in errors), errors


@pytest.mark.parametrize(
    ("kwargs", "refused"),
    [
        ({"lenient": True}, False),
        ({}, False),
        ({"method": "flexible"}, True),
        ({"lenient": "yes"}, True),
    ],
)
def test_builtin_scorer_kwargs_refused_at_validation_as_at_start(kwargs, refused):
    tree = copy.deepcopy(DEMO)
    tree["custom_reward_function"] = {"reward_kwargs": kwargs}
    errors = _errors(tree)
    try:
        default_reward_function(kwargs)
        runtime_refused = False
    except RewardError:
        runtime_refused = True
    assert runtime_refused is refused
    assert bool(errors) is refused, errors
    if refused:
        assert all("custom_reward_function.reward_kwargs" in e for e in errors), errors


def test_a_custom_function_takes_any_reward_kwargs():
    tree = copy.deepcopy(DEMO)
    tree["custom_reward_function"] = {"path": "/code/score.py", "reward_kwargs": {"w": 3}}
    assert _errors(tree) == []
