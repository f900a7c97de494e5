"""A discriminative reward model served under verl's ``rollout.name`` validates; a generative one
(``custom_reward_function.path`` beside the reward model, verl 0.9.1's reward loop) plans a vLLM
judge engine (``plan.reward_judge``) in either spelling; other engines and judge TP are refused.
``data.return_raw_input_ids`` is read by nothing in verl 0.9.1 and has no effect.
The rule is ``kuberl_api/validation/rules_reward.py``; the fates are in ``kuberl_api/keys``.
"""

import copy
from pathlib import Path
from typing import Any

import yaml

from kuberl_api.keys import REGISTRY
from kuberl_api.plan import build_run_plan
from kuberl_api.validation import Document, DocumentKind, validate_document
from kuberl_api.validation.documents import set_dotted

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
RM = {"reward.reward_model.enable": True, "reward.reward_model.model_path": "/models/rm"}
# What verl 0.9.0's run_mistral_nemo_12b_skyworkrm_fsdp.sh writes for its Skywork scorer.
SERVED = {
    "reward.reward_model.rollout.name": "vllm",
    "reward.reward_model.rollout.gpu_memory_utilization": 0.8,
    "reward.reward_model.rollout.tensor_model_parallel_size": 1,
    "reward.reward_model.rollout.prompt_length": 8192,
    "reward.reward_model.rollout.response_length": 4096,
}
FUNCTION = {"reward.custom_reward_function.path": "/rewards/judge.py"}


def _validate(**dotted: Any) -> Any:
    tree = copy.deepcopy(DEMO)
    for key, value in dotted.items():
        set_dotted(tree, key, value)
    return validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))


def _plan(**dotted: Any) -> dict[str, Any]:
    """All of the plan but ``source`` (the effective config, kept for the record)."""
    result = _validate(**dotted)
    assert result.ok, [p.render() for p in result.errors]
    return build_run_plan(result.backend_config).model_dump(exclude={"source"})


def test_a_discriminative_reward_model_served_by_vllm_validates_without_effect():
    result = _validate(**RM, **SERVED)
    assert result.ok, [p.render() for p in result.errors]
    assert "reward_model.rollout" in result.not_honoured
    assert "sequence-classification" in REGISTRY["reward_model.rollout"].reason
    assert _plan(**RM, **SERVED) == _plan(**RM)


def test_a_generative_reward_model_plans_its_judge_engine():
    plan = _plan(**RM, **SERVED, **FUNCTION)
    judge = plan["reward_judge"]
    assert judge["enable"] and judge["name"] == "vllm" and judge["model_path"] == "/models/rm"
    assert judge["placement"] == "colocated" and judge["tensor_model_parallel_size"] == 1
    assert judge["gpu_memory_utilization"] == 0.8 and judge["max_model_len"] == 8192 + 4096
    assert judge["max_num_seqs"] == 1024 and judge["free_cache_engine"]  # verl's defaults
    assert not _plan(**RM, **SERVED)["reward_judge"]["enable"]  # no function: discriminative


def test_both_spellings_plan_the_same_judge():
    older = {
        "reward_model.enable": True,
        "reward_model.model.path": "/models/rm",
        "reward_model.rollout": {k.rsplit(".", 1)[1]: v for k, v in SERVED.items()},
        "custom_reward_function.path": "/rewards/judge.py",
    }
    assert _plan(**older)["reward_judge"] == _plan(**RM, **SERVED, **FUNCTION)["reward_judge"]


def test_a_judge_on_another_engine_is_refused_at_the_key_written():
    result = _validate(**RM, **{**SERVED, "reward.reward_model.rollout.name": "sglang"}, **FUNCTION)
    (error,) = result.errors
    assert error.path == "reward.reward_model.rollout.name" and error.value == "sglang"
    assert "vLLM" in error.message and "name: vllm" in error.hint


def test_a_judge_with_tensor_parallelism_is_refused():
    tp = "reward.reward_model.rollout.tensor_model_parallel_size"
    result = _validate(**RM, **{**SERVED, tp: 4}, **FUNCTION)
    (error,) = result.errors
    assert error.path == tp and error.value == 4 and "tensor_model_parallel_size: 1" in error.hint
    unwritten = {k: v for k, v in SERVED.items() if k != tp}
    (error,) = _validate(**RM, **unwritten, **FUNCTION).errors  # verl's default is 2
    assert error.path == "reward_model.rollout.tensor_model_parallel_size" and error.value == 2


def test_the_older_spelling_is_refused_alike():
    result = _validate(
        **{
            "reward_model.enable": True,
            "reward_model.model.path": "/models/rm",
            "reward_model.rollout": {"name": "sglang", "tensor_model_parallel_size": 1},
            "custom_reward_function.path": "/rewards/judge.py",
        }
    )
    (error,) = result.errors
    assert error.path == "reward_model.rollout.name" and error.value == "sglang"


def test_a_function_with_the_reward_model_off_leaves_rollout_without_effect():
    result = _validate(**SERVED, **FUNCTION)
    assert result.ok, [p.render() for p in result.errors]
    assert "reward_model.rollout" in result.not_honoured


def test_return_raw_input_ids_is_accepted_without_effect():
    result = _validate(**{"data.return_raw_input_ids": True})
    assert result.ok, [p.render() for p in result.errors]
    assert "data.return_raw_input_ids" in result.not_honoured
    assert "reads it nowhere" in REGISTRY["data.return_raw_input_ids"].reason
    assert _plan(**{"data.return_raw_input_ids": True}) == _plan()


def test_the_prime_manager_cannot_call_a_judge():
    manager = {"reward.reward_manager.name": "prime"}
    (error,) = _validate(**RM, **SERVED, **FUNCTION, **manager).errors
    assert error.path == "reward.reward_manager.name" and error.value == "prime"
    assert _validate(**RM, **SERVED, **FUNCTION, **{"reward.reward_manager.name": "gdpo"}).ok
