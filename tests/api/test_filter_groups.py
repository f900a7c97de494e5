"""`algorithm.filter_groups` (DAPO dynamic sampling) and `data.gen_batch_size`: what validates,
what is refused (key, value, fix), and what reaches the plan."""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberl_api.keys import REGISTRY, Fate
from kuberl_api.plan import build_run_plan
from kuberl_api.validation import Document, DocumentKind, validate_document
from kuberl_api.validation.documents import set_dotted

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
FG = "algorithm.filter_groups."


def _validate(**dotted: Any) -> Any:
    tree = copy.deepcopy(DEMO)
    for key, value in dotted.items():
        set_dotted(tree, key, value)
    return validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))


def _errors(result: Any) -> list[str]:
    return [p.render() for p in result.errors]


def test_enabled_filter_and_gen_batch_size_reach_the_plan():
    batch = DEMO["data"]["train_batch_size"]
    result = _validate(
        **{
            FG + "enable": True,
            FG + "metric": "acc",
            FG + "max_num_gen_batches": 10,
            "data.gen_batch_size": 3 * batch,
        }
    )
    assert result.ok, _errors(result)
    plan = build_run_plan(result.backend_config)
    fg = plan.algorithm.filter_groups
    assert (fg.enable, fg.metric, fg.max_num_gen_batches) == (True, "acc", 10)
    assert (plan.data.train_batch_size, plan.data.gen_batch_size) == (batch, 3 * batch)


def test_off_is_one_plan_and_generation_batches_are_training_batches():
    result = _validate(**{FG + "metric": "acc", FG + "max_num_gen_batches": 4})
    assert result.ok, _errors(result)
    plan = build_run_plan(result.backend_config)
    fg = plan.algorithm.filter_groups
    assert (fg.enable, fg.metric, fg.max_num_gen_batches) == (False, "", 0)
    assert plan.data.gen_batch_size == plan.data.train_batch_size


def test_a_negative_limit_means_no_limit():
    result = _validate(
        **{FG + "enable": True, FG + "metric": "seq_reward", FG + "max_num_gen_batches": -1}
    )
    assert result.ok, _errors(result)
    assert build_run_plan(result.backend_config).algorithm.filter_groups.max_num_gen_batches == 0


def test_the_metric_defaults_to_verls_reward():
    result = _validate(**{FG + "enable": True})
    assert result.ok, _errors(result)
    assert build_run_plan(result.backend_config).algorithm.filter_groups.metric == "reward"


@pytest.mark.parametrize("metric", [None, ""])
def test_enabled_without_a_metric_is_refused_at_the_metric(metric):
    (problem,) = _validate(**{FG + "enable": True, FG + "metric": metric}).errors
    assert problem.path.endswith("algorithm.filter_groups.metric")
    assert "acc" in problem.hint and "seq_reward" in problem.hint


def test_seq_final_reward_with_kl_in_reward_is_refused():
    result = _validate(
        **{
            FG + "enable": True,
            FG + "metric": "seq_final_reward",
            "algorithm.use_kl_in_reward": True,
        }
    )
    (problem,) = [p for p in result.errors if "filter_groups" in p.path]
    text = problem.render()
    assert "seq_final_reward" in text and "use seq_reward" in text


@pytest.mark.parametrize("metric", ["acc", "score"])
def test_a_reward_model_has_no_extra_info_metric(metric):
    result = _validate(
        **{
            FG + "enable": True,
            FG + "metric": metric,
            "reward_model.enable": True,
            "reward_model.model.path": "/models/rm",
        }
    )
    (problem,) = [p for p in result.errors if "filter_groups" in p.path]
    assert metric in problem.render() and "reward, seq_reward, seq_final_reward" in problem.hint


def test_gen_batch_size_without_the_filter_is_refused_with_the_fix():
    batch = DEMO["data"]["train_batch_size"]
    (problem,) = _validate(**{"data.gen_batch_size": 2 * batch}).errors
    text = problem.render()
    assert problem.path.endswith("data.gen_batch_size") and str(2 * batch) in text
    assert "algorithm.filter_groups" in problem.hint
    assert _validate(**{"data.gen_batch_size": batch}).ok


def test_one_response_per_prompt_warns_that_nothing_is_dropped():
    result = _validate(
        **{FG + "enable": True, FG + "metric": "acc", "actor_rollout_ref.rollout.n": 1}
    )
    assert any("drops nothing" in p.render() for p in result.warnings)


def test_fates():
    fates = {k: REGISTRY[FG + k].fate for k in ("enable", "metric", "max_num_gen_batches")}
    assert set(fates.values()) == {Fate.HONOURED}
    assert REGISTRY[FG + "max_inflight_gen_batches"].fate is Fate.NO_EFFECT
    assert REGISTRY["data.gen_batch_size"].fate is Fate.HONOURED
