"""Validated means it starts: every config this repository ships or reads as a reference (the
examples, verl's documented ppo_trainer.yaml, verl 0.9.1's own default config from the installed
wheel, as written and completed with the micro-batch sizes verl itself requires) is either
refused at validation, naming keys, or passes every check the runtime makes at
start from the config alone: this image's checks (`check_runtime`: trackers, the vLLM engine),
the trained model's spec, the reward manager, and the plan's JSON round trip as the operator ships
it. A config that passes validation and is then refused by the runtime fails here.

The model-dependent refusals (a critic on a vision-language policy, freeze_vision_tower on a text
model, an SP degree the heads cannot be split by) are held two ways: validation refuses them
when it can read the model's config.json, and the runtime's driver (`check_runtime`, before any
rank starts) when the config.json appears only after validation (a remote model fetched later).
"""

from __future__ import annotations

import copy
import importlib.resources
import json
from pathlib import Path

import pytest
import yaml

from kuberl_api.plan import RunPlan
from kuberl_api.plan.from_document import load_plan_json, plan_document
from kuberl_api.plan.model_rules import FREEZE_KEY, SP_KEY
from kuberl_api.validation import Document, DocumentKind, load_documents, validate_document
from kuberl_api.validation.documents import set_dotted
from kuberl_api.validation.problems import SpecInvalid
from kuberl_runtime.config import RunConfig, check_runtime
from kuberl_runtime.rewards.manager import reward_manager_for
from kuberl_runtime.trainer.components import actor_model_spec

ROOT = Path(__file__).resolve().parents[2]
# verl's default leaves these null and refuses to run without them (as kuberl's validation does)
MICRO_BATCHES = {
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 4,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 4,
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 4,
    "critic.ppo_micro_batch_size_per_gpu": 4,
}


def _with(tree: dict, changes: dict[str, object]) -> dict:
    tree = copy.deepcopy(tree)
    for key, value in changes.items():
        set_dotted(tree, key, value)
    return tree


def _documents() -> list[tuple[str, Document]]:
    docs = [
        (f"{path.name}[{i}]", doc)
        for path in sorted((ROOT / "examples").glob("*.yaml"))
        for i, doc in enumerate(load_documents(path))
    ]
    verl_doc = yaml.safe_load((ROOT / "tests/api/data/verl_doc_ppo_trainer.yaml").read_text())
    verl_default = yaml.safe_load(
        importlib.resources.files("verl.trainer.config")
        .joinpath("_generated_ppo_trainer.yaml")
        .read_text()
    )
    trees = {
        "verl_doc_ppo_trainer.yaml": verl_doc,
        "verl 0.9.1 default": verl_default,
        "verl 0.9.1 default, micro-batches set": _with(verl_default, MICRO_BATCHES),
    }
    for name, tree in trees.items():
        docs.append((name, Document(DocumentKind.BACKEND_CONFIG, tree, "", name, {})))
    return docs


DOCUMENTS = _documents()


@pytest.mark.parametrize(("name", "doc"), DOCUMENTS, ids=[name for name, _ in DOCUMENTS])
def test_an_accepted_config_passes_the_runtimes_start_checks(name, doc):
    result = validate_document(doc)
    if result.errors:  # refused before anything is provisioned: each error names a key
        assert all(p.path and p.hint for p in result.errors), [p.render() for p in result.errors]
        return
    job = plan_document(doc)
    shipped = load_plan_json(job.plan.to_json())
    assert shipped == job.plan
    check_runtime(RunConfig(shipped), job.config_path)
    spec = actor_model_spec(shipped)
    assert spec.path == shipped.model.path
    if isinstance(shipped, RunPlan) and not shipped.reward_function.path:
        reward_manager_for(shipped.reward_function)


def test_the_examples_and_the_completed_verl_configs_are_accepted():
    """The configs users copy first, and verl's own once what verl itself needs is set: none of
    them may be refused, so the start checks above run on each."""
    must_start = [name for name, _ in DOCUMENTS if name != "verl 0.9.1 default"]
    refused = {
        name: [p.render() for p in validate_document(doc).errors]
        for name, doc in DOCUMENTS
        if name in must_start and validate_document(doc).errors
    }
    assert refused == {}


TEXT_MODEL = {"model_type": "qwen2", "num_attention_heads": 6, "num_key_value_heads": 2}
VL_MODEL = {
    "model_type": "qwen2_5_vl",
    "vision_config": {"depth": 1, "spatial_merge_size": 2},
    "text_config": {"num_attention_heads": 4, "num_key_value_heads": 2},
}
PACKED = {"actor_rollout_ref.model.use_remove_padding": True}  # SP packs its sequences
GAE_CRITIC = {"algorithm.adv_estimator": "gae", "critic.enable": True, **MICRO_BATCHES}
# (model's config.json, the refused settings, their key, the same settings that start)
MODEL_CASES = {
    "critic on a VL policy": (VL_MODEL, GAE_CRITIC, "critic.enable", {}),
    "freeze_vision_tower, text model": (TEXT_MODEL, {FREEZE_KEY: True}, FREEZE_KEY, {}),
    "SP 4 over 6 heads": (TEXT_MODEL, {SP_KEY: 4, **PACKED}, SP_KEY, {SP_KEY: 2, **PACKED}),
}


def _demo_with(model_dir: Path, changes: dict[str, object]) -> Document:
    tree = yaml.safe_load((ROOT / "examples/demo.yaml").read_text())
    tree = _with(tree, {"actor_rollout_ref.model.path": str(model_dir), **changes})
    tree["trainer"]["n_gpus_per_node"] = 4  # room for SP 4
    return Document(DocumentKind.BACKEND_CONFIG, tree, "", "demo.yaml", {})


@pytest.mark.parametrize("case", MODEL_CASES, ids=list(MODEL_CASES))
def test_a_model_the_runtime_refuses_is_refused_before_any_rank(case, tmp_path):
    config, refused, key, accepted = MODEL_CASES[case]
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    late = _demo_with(model_dir, refused)  # validated before the model's files arrive
    assert validate_document(late).errors == []
    job = plan_document(late)
    (model_dir / "config.json").write_text(json.dumps(config))
    # Read at validation: refused there, naming the key.
    errors = validate_document(_demo_with(model_dir, refused)).errors
    assert [p.path for p in errors] == [key], [p.render() for p in errors]
    assert str(model_dir) in errors[0].message and errors[0].hint
    # Not read at validation: the driver refuses it, with the same key, before any rank starts.
    with pytest.raises(SpecInvalid) as refusal:
        check_runtime(RunConfig(load_plan_json(job.plan.to_json())))
    assert [p.path for p in refusal.value.problems] == [key]
    # What the runtime accepts of that model, validation accepts too, and the driver starts it.
    ok = _demo_with(model_dir, accepted)
    assert validate_document(ok).errors == []
    check_runtime(RunConfig(plan_document(ok).plan))
