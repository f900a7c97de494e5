"""What a vision-language run does not support yet is refused at start with the key and the fix;
what it supports (Ulysses SP) starts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kuberl_api.backend_config import BackendConfig
from kuberl_api.plan import build_run_plan
from kuberl_api.validation.problems import SpecInvalid
from kuberl_runtime.config import run_config_from_dict
from kuberl_runtime.trainer.components import _vision_processor

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    from kuberl_runtime.testing.tiny_vl import save_tiny_vl

    model = save_tiny_vl(tmp_path_factory.mktemp("tiny-vl"))
    config = yaml.safe_load((REPO / "examples" / "vl-demo.yaml").read_text())
    config["actor_rollout_ref"]["model"]["path"] = str(model)
    return config


def _processor(tree, processor):
    plan = run_config_from_dict(tree).plan
    return _vision_processor(plan, processor.tokenizer)


def test_the_demo_loads_the_models_processor(tree, processor):
    assert _processor(tree, processor).image_processor is not None


def test_ulysses_sp_with_a_vl_model_starts(tree, processor):
    """Ulysses SP runs a VL model (tests/runtime/vl/test_vl_sequence_parallel.py): not refused."""
    tree = yaml.safe_load(yaml.safe_dump(tree))
    tree["actor_rollout_ref"]["actor"]["ulysses_sequence_parallel_size"] = 2
    assert _processor(tree, processor).image_processor is not None


def test_a_critic_on_a_vl_model_is_refused(tree, processor):
    tree = yaml.safe_load(yaml.safe_dump(tree))
    tree["algorithm"]["adv_estimator"] = "gae"
    tree["critic"] = {
        "enable": True,
        "model": {"path": tree["actor_rollout_ref"]["model"]["path"]},
        "ppo_mini_batch_size": 4,
        "ppo_micro_batch_size_per_gpu": 8,
    }
    # Validation reads the model's config.json and refuses it (kuberl_api/plan/model_rules.py).
    with pytest.raises(SpecInvalid, match=r"critic\.enable: a critic on a vision-language"):
        run_config_from_dict(tree)
    # A plan that skipped validation: the component build refuses it too.
    plan = build_run_plan(BackendConfig.model_validate(tree))
    with pytest.raises(ValueError, match=r"critic\.enable with a vision-language model"):
        _vision_processor(plan, processor.tokenizer)
