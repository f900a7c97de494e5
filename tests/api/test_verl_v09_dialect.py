"""verl's own spellings read as verl reads them (issue 25, item 1): the documented FSDP
``ppo_trainer.yaml``, ``trainer.logger: tracking``, the reward model's flat ``min_num_params``,
verl 0.9's ``reward.*`` tree beside ``reward_model.*``, ``rollout.mode`` and other engines'
``engine_kwargs``. The resolver is ``kuberl_api/validation/spellings.py``.
"""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberl_api.keys.verl_defaults import verl_defaults
from kuberl_api.plan import RunPlan, build_run_plan
from kuberl_api.validation import Document, DocumentKind, load_documents, validate_document
from kuberl_api.validation.documents import set_dotted

ROOT = Path(__file__).resolve().parents[2]
DOC_YAML = Path(__file__).parent / "data" / "verl_doc_ppo_trainer.yaml"
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
RM_FSDP = "reward_model.model.fsdp_config"


def _validate(tree: dict) -> Any:
    return validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))


def _demo(**dotted: Any) -> dict:
    tree = copy.deepcopy(DEMO)
    for key, value in dotted.items():
        set_dotted(tree, key, value)
    return tree


def _plan(tree: dict) -> RunPlan:
    result = _validate(tree)
    assert result.ok, [p.render() for p in result.errors]
    return build_run_plan(result.backend_config)


def _doc_yaml() -> dict:
    (doc,) = load_documents(DOC_YAML)
    return copy.deepcopy(doc.body)


def test_verls_documented_ppo_trainer_yaml_validates_and_plans_as_written():
    """Its HDFS copy target is a local ~/ path, which verl copies to as well: accepted with a
    warning that the copy stays on the saving pod's disk, resolved to a file:// mirror."""
    (doc,) = load_documents(DOC_YAML)
    result = validate_document(doc)
    assert result.ok, [p.render() for p in result.errors]
    (warning,) = [p for p in result.warnings if p.path == "trainer.default_hdfs_dir"]
    assert "local path" in warning.message and "s3://" in warning.hint
    plan = build_run_plan(result.backend_config)
    assert plan.trainer.checkpoint_mirror == "file://~/experiments/gsm8k/ppo/gsm8k"
    assert plan.trainer.loggers == ["console", "wandb"]
    assert result.backend_config.reward_model.model.fsdp_config.wrap_policy.min_num_params == 0


@pytest.mark.parametrize("value", [None, ""])
def test_an_unset_hdfs_dir_passes(value):
    assert _validate(_demo(**{"trainer.default_hdfs_dir": value})).ok


def test_tracking_is_verls_old_name_for_wandb():
    older = _validate(_demo(**{"trainer.logger": ["console", "tracking"]}))
    assert older.ok and older.backend_config.trainer.loggers == ["console", "wandb"]
    (warning,) = [p for p in older.warnings if p.path == "trainer.logger"]
    assert "wandb" in warning.hint
    newer = _demo(**{"trainer.logger": ["console", "wandb"]})
    assert _plan(newer) == build_run_plan(older.backend_config)
    assert _validate(_demo(**{"trainer.logger": "tracking"})).backend_config.trainer.logger == (
        "wandb"
    )


@pytest.mark.parametrize(("value", "ok"), [(0, True), (10_000, False)])
def test_the_flat_min_num_params_is_the_reward_models_wrap_policy(value, ok):
    flat = _validate(_demo(**{f"{RM_FSDP}.min_num_params": value}))
    nested = _validate(_demo(**{f"{RM_FSDP}.wrap_policy.min_num_params": value}))
    assert flat.ok is nested.ok is ok
    if not ok:  # the same refusal, at the key the user wrote
        assert [p.path for p in flat.errors] == [f"{RM_FSDP}.min_num_params"]
        assert flat.errors[0].hint == nested.errors[0].hint


def test_both_wrap_policy_spellings_set_differently_is_an_error_naming_both():
    result = _validate(
        _demo(**{f"{RM_FSDP}.min_num_params": 0, f"{RM_FSDP}.wrap_policy.min_num_params": 5})
    )
    (error,) = result.errors
    assert error.path == f"{RM_FSDP}.min_num_params"
    assert f"{RM_FSDP}.wrap_policy.min_num_params" in error.message


REWARD_SPELLINGS = [
    (
        {"reward.reward_manager.name": "batch"},
        {"reward_model.reward_manager": "batch"},
    ),
    (
        {
            "reward.custom_reward_function.path": "/rewards/score.py",
            "reward.custom_reward_function.name": "my_score",
            "reward.custom_reward_function.reward_kwargs": {"k": 1},
        },
        {
            "custom_reward_function.path": "/rewards/score.py",
            "custom_reward_function.name": "my_score",
            "custom_reward_function.reward_kwargs": {"k": 1},
        },
    ),
    (
        {"reward.reward_model.enable": True, "reward.reward_model.model_path": "/models/rm"},
        {"reward_model.enable": True, "reward_model.model.path": "/models/rm"},
    ),
    (
        {"reward.reward_manager.name": "dapo", "reward.reward_kwargs.max_resp_len": 32},
        {"reward_model.reward_manager": "dapo", "reward_model.reward_kwargs.max_resp_len": 32},
    ),
]


@pytest.mark.parametrize(("newer", "older"), REWARD_SPELLINGS)
def test_each_reward_spelling_gives_the_same_plan(newer, older):
    plan = _plan(_demo(**newer))
    assert plan == _plan(_demo(**older))
    assert plan != _plan(_demo())  # the keys reached the plan


def test_verls_full_default_reward_tree_asks_for_nothing():
    """verl's generated config writes the whole reward tree at its defaults beside the older
    keys; only what differs from verl's default is read."""
    reward = copy.deepcopy(verl_defaults().values["reward"])
    reward["reward_manager"]["name"] = "batch"
    tree = _demo(**{"reward_model.reward_manager": None})
    tree["reward"] = reward
    assert _plan(tree) == _plan(_demo(**{"reward_model.reward_manager": "batch"}))


def test_both_reward_spellings_set_differently_is_an_error_naming_both():
    result = _validate(
        _demo(**{"reward.reward_manager.name": "dapo", "reward_model.reward_manager": "batch"})
    )
    (error,) = result.errors
    assert error.path == "reward.reward_manager.name"
    assert "reward_model.reward_manager" in error.message and error.value == "dapo"


def test_a_refusal_on_the_newer_spelling_names_the_key_written():
    result = _validate(_demo(**{"reward.reward_manager.name": "limited"}))
    (error,) = result.errors
    assert error.path == "reward.reward_manager.name"
    assert "naive, batch, dapo, prime and gdpo" in error.hint


def test_an_unknown_reward_key_is_an_error():
    result = _validate(_demo(**{"reward.reward_manger.name": "dapo"}))
    (error,) = result.errors
    assert error.path == "reward.reward_manger.name" and "reward.reward_manager.name" in error.hint


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_rollout_mode_is_accepted_without_effect(mode):
    result = _validate(_demo(**{"actor_rollout_ref.rollout.mode": mode}))
    assert result.ok
    assert "actor_rollout_ref.rollout.mode" in result.at_verl_default


@pytest.mark.parametrize("engine", ["sglang", "trtllm"])
def test_another_engines_kwargs_have_no_effect_on_a_vllm_rollout(engine):
    key = f"actor_rollout_ref.rollout.engine_kwargs.{engine}"
    result = _validate(
        _demo(**{"actor_rollout_ref.rollout.name": "vllm", key: {"attention_backend": "triton"}})
    )
    assert result.ok, [p.render() for p in result.errors]
    assert key in result.not_honoured
