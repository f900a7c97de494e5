"""Keys verl v0.9's example scripts set on its engine and rollout configs, read as verl reads
them (issue 25): the Ulysses degree under ``fsdp_config`` (verl 0.9's own spelling, which its
engine reads), ``rollout.cudagraph_capture_sizes`` (vLLM's compilation config) and
``actor.use_prefix_grouper`` (a speed-up kuberl's padded forwards already make). Pure
validation and planning: milliseconds each."""

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberl_api.plan import RunPlan, build_run_plan
from kuberl_api.validation import Document, DocumentKind, validate_document
from kuberl_api.validation.documents import set_dotted
from kuberl_runtime.rollout.vllm import build_engine_kwargs

DEMO = yaml.safe_load((Path(__file__).resolve().parents[2] / "examples/demo.yaml").read_text())
A = "actor_rollout_ref.actor."
SP = "ulysses_sequence_parallel_size"
PACKED = {"actor_rollout_ref.model.use_remove_padding": True}
CUDAGRAPH = "actor_rollout_ref.rollout.cudagraph_capture_sizes"


def _tree(dotted: dict[str, Any]) -> dict:
    tree = copy.deepcopy(DEMO)
    for key, value in {**PACKED, **dotted}.items():
        set_dotted(tree, key, value)
    return tree


def _validate(dotted: dict[str, Any]) -> Any:
    return validate_document(Document(DocumentKind.BACKEND_CONFIG, _tree(dotted), "", "t", {}))


def _plan(dotted: dict[str, Any]) -> RunPlan:
    result = _validate(dotted)
    assert result.ok, [p.render() for p in result.errors]
    return build_run_plan(result.backend_config)


def test_the_engines_ulysses_degree_is_the_actors():
    """verl 0.9's scripts write the degree under fsdp_config (its engine reads it there); kuberl
    ran them without SP before. It now plans the (dp, sp) layout the script asks for."""
    assert _plan({}).placement.sp_size == 1
    placement = _plan({A + "fsdp_config." + SP: 2}).placement
    assert (placement.sp_size, placement.dp_size) == (2, 1)
    assert _plan({A + "fsdp_config." + SP: 2}) == _plan({A + SP: 2})


@pytest.mark.parametrize("engine_sp", [1, 2, None])
def test_the_older_spelling_above_one_agrees_with_the_engines(engine_sp):
    """verl's default writes fsdp_config's as 1 beside the owner's: 1 (or unset) asks nothing."""
    assert _plan({A + SP: 2, A + "fsdp_config." + SP: engine_sp}).placement.sp_size == 2


def test_both_spellings_above_one_and_different_is_an_error_naming_both():
    """verl would silently take the owner's; kuberl names both keys."""
    result = _validate({A + SP: 2, A + "fsdp_config." + SP: 4})
    (problem,) = result.errors
    assert problem.path == A + "fsdp_config." + SP
    assert A + SP in problem.message and problem.value == 4


@pytest.mark.parametrize(
    "key", ["actor_rollout_ref.ref.fsdp_config." + SP, "critic.model.fsdp_config." + SP]
)
def test_the_reference_and_critic_engines_run_in_the_actors_layout(key):
    """Their engine degree equal to the actor's is accepted; another one is refused at the key
    the user wrote, with the fix."""
    critic = {"algorithm.adv_estimator": "gae", "critic.ppo_micro_batch_size_per_gpu": 4}
    ok = _validate({**critic, A + "fsdp_config." + SP: 2, key: 2})
    assert ok.ok, [p.render() for p in ok.errors]
    result = _validate({**critic, key: 2})
    (problem,) = result.errors
    assert problem.path == key and problem.value == 2
    assert "actor's (dp, sp) layout" in problem.hint


def test_cudagraph_capture_sizes_reach_vllms_compilation_config():
    """As verl's vLLM server passes them; a compilation_config the user wrote keeps its other
    settings (a JSON string as verl accepts it too), the rollout key wins for the sizes."""
    plan = _plan({CUDAGRAPH: [8, 16, 32]})
    assert plan.rollout.engine_kwargs.vllm == {
        "compilation_config": {"cudagraph_capture_sizes": [8, 16, 32]}
    }
    kwargs = build_engine_kwargs(
        plan.rollout, model_path="m", trust_remote_code=False, hf_overrides={}
    )
    assert kwargs["compilation_config"] == {"cudagraph_capture_sizes": [8, 16, 32]}
    written = '{"cudagraph_mode": "PIECEWISE", "cudagraph_capture_sizes": [1]}'
    plan = _plan(
        {
            CUDAGRAPH: [4],
            "actor_rollout_ref.rollout.engine_kwargs.vllm": {"compilation_config": written},
        }
    )
    assert plan.rollout.engine_kwargs.vllm["compilation_config"] == {
        "cudagraph_mode": "PIECEWISE",
        "cudagraph_capture_sizes": [4],
    }
    assert "compilation_config" not in _plan({}).rollout.engine_kwargs.vllm


def test_the_prefix_grouper_is_accepted_without_changing_the_plan():
    result = _validate({A + "use_prefix_grouper": True})
    assert result.ok, [p.render() for p in result.errors]
    assert A + "use_prefix_grouper" in result.not_honoured
    plan = build_run_plan(result.backend_config).model_dump(exclude={"source"})
    assert plan == _plan({}).model_dump(exclude={"source"})  # only the copy of the config differs


def test_the_demo_is_unchanged_by_these_keys_at_verls_defaults():
    defaults = {A + "fsdp_config." + SP: 1, CUDAGRAPH: None, A + "use_prefix_grouper": False}
    assert _plan(defaults) == _plan({})


def test_a_compilation_config_string_that_is_not_json_is_an_error_naming_it():
    vllm = {"compilation_config": "{cudagraph_mode: PIECEWISE"}
    result = _validate({CUDAGRAPH: [4], "actor_rollout_ref.rollout.engine_kwargs.vllm": vllm})
    (problem,) = result.errors
    assert problem.path == "actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config"
    assert "not JSON" in problem.message and problem.value == vllm["compilation_config"]
