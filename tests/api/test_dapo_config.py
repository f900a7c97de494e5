"""`reward_model.reward_kwargs` as verl's DAPO recipe writes it: honoured with `reward_manager:
dapo`, refused (path, value, fix) where verl's DAPORewardManager would assert or do nothing."""

import copy
from pathlib import Path

import pytest
import yaml

from kuberl_api.plan import build_run_plan
from kuberl_api.validation import Document, DocumentKind, validate_document

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
KW = "reward_model.reward_kwargs"


def _validate(reward_model: dict, **top: dict):
    tree = copy.deepcopy(DEMO)
    tree["reward_model"] = reward_model
    tree.update(top)
    return validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))


def _dapo(buffer: dict | None = None, **kwargs) -> dict:
    buffer = {"enable": True, "len": 8, "penalty_factor": 1.0, "log": False, **(buffer or {})}
    return {
        "reward_manager": "dapo",
        "reward_kwargs": {"overlong_buffer_cfg": buffer, "max_resp_len": 32, **kwargs},
    }


def test_verls_dapo_recipe_plans_with_its_penalty():
    result = _validate(_dapo({"penalty_factor": 0.5, "log": True}))
    assert result.ok, [p.render() for p in result.problems]
    fn = build_run_plan(result.backend_config).reward_function
    assert fn.reward_manager == "dapo"
    assert (fn.overlong_buffer.enable, fn.overlong_buffer.len) == (True, 8)
    assert (fn.overlong_buffer.penalty_factor, fn.overlong_buffer.log) == (0.5, True)
    assert fn.max_resp_len == 32


def test_without_reward_kwargs_the_buffer_is_off():
    result = _validate({"reward_manager": "dapo"})
    assert result.ok
    fn = build_run_plan(result.backend_config).reward_function
    assert (fn.overlong_buffer.enable, fn.max_resp_len) == (False, 0)


@pytest.mark.parametrize(
    ("reward_model", "path", "fix"),
    [
        (
            {**_dapo(), "reward_manager": "naive"},
            f"{KW}.overlong_buffer_cfg.enable",
            "reward_manager: dapo",
        ),
        (_dapo(max_resp_len=None), f"{KW}.max_resp_len", "data.max_response_length"),
        (_dapo({"len": 0}), f"{KW}.overlong_buffer_cfg.len", "enable: false"),
        (_dapo(max_resp_len=4), f"{KW}.max_resp_len", ">= overlong_buffer_cfg.len"),
    ],
)
def test_what_verls_manager_asserts_is_an_error_with_path_and_fix(reward_model, path, fix):
    result = _validate(reward_model)
    assert [p.path for p in result.errors] == [path], [p.render() for p in result.problems]
    assert fix in result.errors[0].render()


def test_an_unknown_reward_kwarg_is_an_error_naming_it():
    result = _validate(_dapo(overlong_buffer={"enable": False}))
    assert not result.ok
    assert any(p.path == f"{KW}.overlong_buffer" for p in result.errors), [
        p.render() for p in result.errors
    ]


def test_verl_0_9_1s_new_spelling_plans_like_the_older_one():
    older = _validate(_dapo())
    newer = _validate(
        {},
        reward={"reward_manager": {"name": "dapo"}, "reward_kwargs": _dapo()["reward_kwargs"]},
    )
    assert newer.ok, [p.render() for p in newer.problems]
    assert build_run_plan(newer.backend_config) == build_run_plan(older.backend_config)


def test_a_reward_kwarg_both_spellings_set_differently_names_both_keys():
    result = _validate(_dapo(), reward={"reward_kwargs": {"max_resp_len": 64}})
    assert [p.path for p in result.errors] == ["reward.reward_kwargs.max_resp_len"]
    assert f"{KW}.max_resp_len" in result.errors[0].message
