"""`fsdp_config.fsdp_size` (HSDP) of the trained models: -1 or a divisor of the world validates
and reaches the plan (engine/fsdp.py builds the (world / fsdp_size, fsdp_size) mesh from it);
anything else is an error naming the key, the value and the world. The reference and reward
model shard over all ranks (their key stays refused)."""

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
# examples/demo.yaml: 1 node x 2 devices.
ACTOR = "actor_rollout_ref.actor.fsdp_config.fsdp_size"
CRITIC = "critic.model.fsdp_config.fsdp_size"


def _validate(**dotted: Any) -> Any:
    tree = copy.deepcopy(DEMO)
    for key, value in dotted.items():
        set_dotted(tree, key.replace("__", "."), value)
    return validate_document(Document(DocumentKind.BACKEND_CONFIG, tree, "", "t.yaml", {}))


@pytest.mark.parametrize("size", [-1, 1, 2])
def test_minus_one_or_a_divisor_of_the_world_reaches_the_plan(size):
    result = _validate(**{ACTOR: size, CRITIC: size})
    assert result.ok, [p.render() for p in result.errors]
    plan = build_run_plan(result.backend_config)
    assert plan.actor.fsdp_config.fsdp_size == size
    assert plan.critic.model.fsdp_config.fsdp_size == size
    assert plan.ref.fsdp_config.fsdp_size == -1


@pytest.mark.parametrize("key", [ACTOR, CRITIC])
@pytest.mark.parametrize("size", [0, 3, -2])
def test_other_sizes_are_errors_naming_key_value_and_world(key, size):
    result = _validate(**{key: size})
    (problem,) = [p for p in result.errors if p.path.endswith(key)]
    text = problem.render()
    assert f"got {size}" in text and "world size 2" in text and "divisor" in text


def test_the_reference_key_stays_refused():
    result = _validate(**{"actor_rollout_ref.ref.fsdp_config.fsdp_size": 2})
    (problem,) = result.errors
    assert "a frozen model shards over all ranks" in problem.render()
