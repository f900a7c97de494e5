"""Validation is bounded work: a spec nested past MAX_DEPTH, a self-doubling ${...} chain, a
reserved env name are each Validated=False naming the limit or the entry, and a validation past
the operator's deadline is refused without being run twice."""

import threading
from typing import Any

import pytest

from kuberl_api.validation import Problem
from kuberl_operator.bounds import MAX_DEPTH, MAX_NODES, shape_problems
from kuberl_operator.config import OperatorConfig
from kuberl_operator.validating import DeadlineValidator, ValidationBusy
from support.manifests import valid_manifest, with_changes


def nested(levels: int) -> dict[str, Any]:
    tree: dict[str, Any] = {"leaf": 1}
    for _ in range(levels):
        tree = {"a": tree}
    return tree


@pytest.fixture
def make(request: pytest.FixtureRequest) -> Any:
    harness_class = type(request.getfixturevalue("harness"))

    def build(changes: dict[str, Any]) -> Any:
        manifest = with_changes(valid_manifest(), {"metadata.name": "grpo", **changes})
        return harness_class(manifest, OperatorConfig())

    return build


def refusal(job: Any) -> str:
    job.reconcile()
    validated = job.condition("Validated")
    assert validated["status"] == "False", validated
    assert job.kube.rayclusters == {}
    return validated["message"]


def test_shape_bounds_name_the_path_and_the_limit():
    [deep] = shape_problems({"affinity": nested(5000)})
    assert deep.path == "spec.affinity" + ".a" * (MAX_DEPTH - 1)
    assert f"more than {MAX_DEPTH} levels" in deep.message and "MAX_DEPTH" in deep.message
    [wide] = shape_problems({"x": list(range(MAX_NODES))})
    assert wide.path == "spec" and "MAX_NODES" in wide.message
    assert shape_problems({"affinity": nested(MAX_DEPTH - 2)}) == []


def test_an_affinity_nested_hundreds_deep_is_refused(make: Any) -> None:
    message = refusal(make({"spec.workerPools[0].affinity": nested(250)}))
    assert "spec.workerPools[0].affinity.a.a" in message and "MAX_DEPTH" in message


def test_a_doubling_interpolation_chain_is_refused_naming_the_limit(make: Any) -> None:
    bomb = {"l0": "xx", **{f"l{i}": f"${{.l{i - 1}}}${{.l{i - 1}}}" for i in range(1, 40)}}
    message = refusal(make({"spec.backend_config.actor_rollout_ref.model.override_config": bomb}))
    assert "spec.backend_config.actor_rollout_ref.model.override_config.l" in message
    assert any(limit in message for limit in ("MAX_RESOLVED_CHARS", "MAX_LOOKUPS", "MAX_CHAIN"))


@pytest.mark.parametrize(
    "name", ["RAY_AUTH_MODE", "ray_auth_token", "RAY_ADDRESS", "KUBERL_JOB_UID"]
)
def test_reserved_env_names_are_refused_naming_the_entry(make: Any, name: str) -> None:
    env = [{"name": "FINE", "value": "1"}, {"name": name, "value": "disabled"}]
    message = refusal(make({"spec.env": env}))
    assert "spec.env[1].name: is set by the operator" in message
    assert repr(name) in message and "remove this env entry" in message


def test_an_ordinary_env_name_is_accepted(make: Any) -> None:
    job = make({"spec.env": [{"name": "RAYON_NUM_THREADS", "value": "1"}]})
    job.reconcile()
    assert job.condition("Validated")["status"] == "True"


def test_a_validation_past_the_deadline_is_refused_and_never_run_twice():
    release, calls = threading.Event(), []

    def slow_policy(spec: Any) -> list[Problem]:
        calls.append(spec)
        release.wait(timeout=60)
        return []

    validator = DeadlineValidator(slow_policy, timeout=0.2)
    manifest = with_changes(valid_manifest(), {"metadata.name": "slow"})
    try:
        first = validator.validate(manifest)
        assert [p.path for p in first.problems] == ["spec"]
        assert "longer than the operator's 0s deadline" in first.problems[0].message
        assert "--validation-timeout" in first.problems[0].message
        again = validator.validate(manifest)
        assert "still running" in again.problems[0].message and len(calls) == 1
        release.set()
        validator.timeout = 60  # a real validation on a loaded machine: well within this
        changed = with_changes(manifest, {"metadata.name": "slow-2"})
        assert validator.validate(changed).problems == [] and len(calls) == 2
        assert validator.validate(manifest).problems  # the overdue spec stays refused
        assert len(calls) == 2
    finally:
        release.set()
        validator.shutdown()


def test_a_validation_that_cannot_start_is_retried_not_refused():
    release = threading.Event()

    def slow_policy(spec: Any) -> list[Problem]:
        release.wait(timeout=60)
        return []

    validator = DeadlineValidator(slow_policy, timeout=0.2, workers=1)
    slow = with_changes(valid_manifest(), {"metadata.name": "slow"})
    good = with_changes(valid_manifest(), {"metadata.name": "good"})
    try:
        assert validator.validate(slow).problems  # holds the only worker past the deadline
        with pytest.raises(ValidationBusy, match="every validation worker is busy"):
            validator.validate(good)
        release.set()
        validator.timeout = 60
        assert validator.validate(good).problems == []  # not remembered as overdue
    finally:
        release.set()
        validator.shutdown()
