"""``algorithm.rollout_correction.*`` and ``rollout.calculate_log_probs``: what validates, what is
refused (naming the key, the value and the fix), and the plan the runtime reads. The schema is
``backend_config/rollout_correction.py``, the resolver ``plan/rollout_correction.py``, the rules
``validation/rules_rollout_correction.py``."""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberl_api.plan import build_run_plan
from kuberl_api.validation import Document, DocumentKind, validate_document
from kuberl_api.validation.documents import set_dotted

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
RC = "algorithm.rollout_correction."
# verl 0.9.0's examples/rollout_correction/run_qwen2_5_7b_fsdp_multi_rs.sh
MULTI_RS = {
    RC + "rollout_is": "token",
    RC + "rollout_is_threshold": 2.0,
    RC + "rollout_is_batch_normalize": False,
    RC + "rollout_rs": "token_k1,seq_max_k2",
    RC + "rollout_rs_threshold": "0.6_1.6,2.5",
    RC + "bypass_mode": True,
    RC + "loss_type": "ppo_clip",
}


def _validate(**dotted: Any) -> Any:
    tree = copy.deepcopy(DEMO)
    for key, value in dotted.items():
        set_dotted(tree, key, value)
    return validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))


def _plan(**dotted: Any) -> dict[str, Any]:
    result = _validate(**dotted)
    assert result.ok, [p.render() for p in result.errors]
    return build_run_plan(result.backend_config).rollout_correction.model_dump()


def test_off_by_default_and_the_rollout_keeps_its_log_probs_to_itself():
    assert _plan() == {
        "calculate_log_probs": False,
        "rollout_is": "",
        "rollout_is_threshold_upper": 0.0,
        "rollout_is_threshold_lower": 0.0,
        "rollout_is_batch_normalize": False,
        "rollout_rs": [],
        "bypass_mode": False,
        "loss_type": "ppo_clip",
    }
    assert _plan(**{"actor_rollout_ref.rollout.calculate_log_probs": True})["calculate_log_probs"]


def test_verls_example_resolves_to_parsed_bounds():
    plan = _plan(**MULTI_RS)
    assert plan["calculate_log_probs"]  # the correction needs them, whatever the key says
    assert (plan["rollout_is"], plan["rollout_is_threshold_upper"]) == ("token", 2.0)
    assert plan["rollout_is_threshold_lower"] == 0.0  # one number: truncation (TIS)
    assert plan["rollout_rs"] == [
        {"option": "token_k1", "lower": 0.6, "upper": 1.6},
        {"option": "seq_max_k2", "lower": 0.0, "upper": 2.5},
    ]
    assert plan["bypass_mode"] and plan["loss_type"] == "ppo_clip"


@pytest.mark.parametrize(
    ("threshold", "bounds"),
    [("0.5_5.0", (5.0, 0.5)), ("3", (3.0, 0.0)), (1.5, (1.5, 0.0))],
)
def test_is_threshold_forms(threshold, bounds):
    plan = _plan(**{RC + "rollout_is": "sequence", RC + "rollout_is_threshold": threshold})
    assert (plan["rollout_is_threshold_upper"], plan["rollout_is_threshold_lower"]) == bounds


def test_a_single_k1_bound_means_its_reciprocal_below():
    plan = _plan(**{RC + "rollout_rs": "seq_mean_k1", RC + "rollout_rs_threshold": 2.0})
    assert plan["rollout_rs"] == [{"option": "seq_mean_k1", "lower": 0.5, "upper": 2.0}]


@pytest.mark.parametrize(
    ("settings", "phrase"),
    [
        ({RC + "rollout_is": "tokens"}, "rollout_is"),
        ({RC + "rollout_is": "token", RC + "rollout_is_threshold": "two"}, "not a number"),
        ({RC + "rollout_is": "token", RC + "rollout_is_threshold": "2_1"}, "lower bound"),
        ({RC + "rollout_is": "token", RC + "rollout_is_threshold": -1.0}, "positive"),
        ({RC + "rollout_rs": "token_k4", RC + "rollout_rs_threshold": 1.0}, "token_k4"),
        ({RC + "rollout_rs": "token_k2"}, "needs rollout_rs_threshold"),
        ({RC + "rollout_rs": "token_k2", RC + "rollout_rs_threshold": "0.5_2"}, "one upper"),
        (
            {RC + "rollout_rs": "token_k1,seq_max_k2", RC + "rollout_rs_threshold": "1,2,3"},
            "3 values",
        ),
        ({RC + "loss_type": "grpo"}, "loss_type"),
    ],
)
def test_bad_settings_are_refused_naming_the_value(settings, phrase):
    result = _validate(**settings)
    assert not result.ok
    rendered = " ".join(p.render() for p in result.errors)
    assert "rollout_correction" in rendered and phrase in rendered, rendered


def test_the_on_policy_shortcut_is_refused_with_any_correction():
    shortcut = {
        "actor_rollout_ref.actor.on_policy_shortcut": True,
        "actor_rollout_ref.actor.ppo_mini_batch_size": 8,  # one mini-batch: on-policy
    }
    assert _validate(**shortcut).ok
    for extra in (
        {RC + "bypass_mode": True},
        {"actor_rollout_ref.rollout.calculate_log_probs": True},
    ):
        (error,) = _validate(**shortcut, **extra).errors
        assert error.path == "actor_rollout_ref.actor.on_policy_shortcut"
        assert "on_policy_shortcut to false" in error.hint


def test_bypass_mode_warns_that_it_replaces_a_written_loss_mode():
    result = _validate(
        **{RC + "bypass_mode": True, "actor_rollout_ref.actor.policy_loss.loss_mode": "gspo"}
    )
    assert result.ok
    (warning,) = [w for w in result.warnings if "loss_mode" in w.path]
    assert warning.value == "gspo" and "ppo_clip" in warning.message


def test_multi_turn_rollouts_feed_the_correction():
    """The multi-turn rollout returns the engine's log-probs of every turn (the refusal is gone):
    the correction and calculate_log_probs resolve as with a single-turn rollout."""
    multi_turn = {
        "actor_rollout_ref.rollout.multi_turn.enable": True,
        "actor_rollout_ref.rollout.multi_turn.tool_config_path": "/tools/calculator.yaml",
    }
    plan = _plan(**multi_turn, **{RC + "rollout_is": "sequence"})
    assert plan["calculate_log_probs"] and plan["rollout_is"] == "sequence"
    assert _plan(**multi_turn, **{"actor_rollout_ref.rollout.calculate_log_probs": True})[
        "calculate_log_probs"
    ]
