"""Validated means it starts: every config this repository ships or reads as a reference (the
examples, verl's documented ppo_trainer.yaml, verl 0.9.1's own default config from the installed
wheel, as written and completed with the micro-batch sizes verl itself requires) is either
refused at validation, naming keys, or passes every check the runtime makes at
start from the config alone: this image's checks (`check_runtime`: trackers, the vLLM engine),
the trained model's spec, the reward manager, and the plan's JSON round trip as the operator ships
it. A config that passes validation and is then refused by the runtime fails here."""

from __future__ import annotations

import copy
import importlib.resources
from pathlib import Path

import pytest
import yaml

from kuberl_api.plan import RunPlan
from kuberl_api.plan.from_document import load_plan_json, plan_document
from kuberl_api.validation import Document, DocumentKind, load_documents, validate_document
from kuberl_api.validation.documents import set_dotted
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
