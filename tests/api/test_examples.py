"""The shipped examples validate, and what they say survives a round trip through the models."""

from pathlib import Path

import pytest

from kuberl_api.backend_config.sft import SFTConfig
from kuberl_api.job import ModelArtsConfig, RLTrainingJobSpec
from kuberl_api.validation import DocumentKind, load_documents, validate_document

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))


def test_the_issue_examples_exist():
    names = {p.name for p in EXAMPLES}
    assert {"grpo-gsm8k.yaml", "ppo-gsm8k.yaml", "modelarts-verl.yaml", "npu-grpo.yaml"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_validates_without_problems(path):
    for doc in load_documents(path):
        result = validate_document(doc)
        assert result.problems == [], [p.render() for p in result.problems]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_round_trips(path):
    models = {
        DocumentKind.MANIFEST: RLTrainingJobSpec,
        DocumentKind.MODELARTS: ModelArtsConfig,
        DocumentKind.SFT: SFTConfig,
    }
    for doc in load_documents(path):
        model = models.get(doc.kind)
        if model is None:  # a bare verl or ROLL tree: checked by validation above
            continue
        parsed = model.model_validate(doc.body)
        again = model.model_validate(parsed.model_dump(exclude_unset=True))
        assert again == parsed


def test_modelarts_dotted_keys_land_in_the_tree():
    (doc,) = load_documents(next(p for p in EXAMPLES if p.name == "modelarts-verl.yaml"))
    result = validate_document(doc)
    cfg = result.backend_config
    assert doc.kind is DocumentKind.MODELARTS
    assert cfg.actor_rollout_ref.rollout.engine_kwargs.vllm == {
        "disable_mm_preprocessor_cache": True
    }
    assert cfg.trainer.device == "npu"
    assert cfg.trainer.default_local_dir == (
        "/home/ma-user/work/outputs/qwen3-8b-grpo/checkpoints/GRPO-Qwen3/GRPO-Qwen3-8B-npu"
    )


def test_placement_is_derived_from_worker_pools():
    (doc,) = load_documents(next(p for p in EXAMPLES if p.name == "npu-grpo.yaml"))
    trainer = validate_document(doc).backend_config.trainer
    assert (trainer.nnodes, trainer.n_gpus_per_node, trainer.device) == (2, 8, "npu")
