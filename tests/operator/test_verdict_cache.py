"""An unchanged job's reconcile does not validate its spec again (verdicts.py): the verdict is
remembered per job by a digest of exactly what validation reads, a changed spec is validated
again, the memory is bounded and a deleted job's entry goes."""

import json
from pathlib import Path
from typing import Any

from kuberl_api.validation import parse_document, validate_document
from kuberl_operator.config import OperatorConfig
from kuberl_operator.spec_policy import PolicySettings, policy_problems
from kuberl_operator.validating import DeadlineValidator, validate_manifest
from kuberl_operator.verdicts import VerdictCache
from support.manifests import valid_manifest, with_changes

FREEZE = "spec.backend_config.actor_rollout_ref.actor.freeze_vision_tower"
MODEL = "spec.backend_config.actor_rollout_ref.model.path"


def test_an_unchanged_tick_does_not_validate_again_and_a_changed_spec_does(
    harness: Any,
) -> None:
    validator = harness.reconciler.validator
    harness.reconcile()
    assert harness.condition("Validated")["status"] == "True" and validator.runs == 1
    first = harness.status
    for _ in range(3):  # timer ticks: same spec, time moves on
        harness.advance(10)
        harness.reconcile()
    assert validator.runs == 1 and harness.status == first
    harness.set_spec({"spec.env": [{"name": "FOO", "value": "1"}]})
    harness.reconcile()
    assert validator.runs == 2 and harness.condition("Validated")["status"] == "True"
    harness.set_spec({"spec.env": [{"name": "RAY_ADDRESS", "value": "x"}]})  # reserved
    harness.reconcile()
    assert validator.runs == 3 and harness.condition("Validated")["status"] == "False"
    harness.advance(10)
    harness.reconcile()  # a refusal is remembered too
    assert validator.runs == 3 and harness.condition("Validated")["status"] == "False"
    assert len(validator.verdicts) == 1  # one entry per job, not per spec seen
    harness.reconciler.finalize(harness.job)
    assert len(validator.verdicts) == 0


def test_the_memory_is_bounded_least_recently_used_first_out() -> None:
    calls: list[Any] = []
    validator = DeadlineValidator(
        lambda spec: calls.append(spec) or [], timeout=60, verdicts=VerdictCache(capacity=2)
    )
    jobs = [with_changes(valid_manifest(), {"metadata.name": f"j{i}"}) for i in range(3)]
    try:
        for job in jobs:
            assert validator.validate(job).problems == []
        assert len(validator.verdicts) == 2 and len(calls) == 3
        validator.validate(jobs[2])  # still remembered
        assert len(calls) == 3
        validator.validate(jobs[0])  # forgotten first: validated again, j1 goes
        assert len(calls) == 4 and len(validator.verdicts) == 2
        validator.validate(jobs[2])
        assert len(calls) == 4
    finally:
        validator.shutdown()


def test_an_operator_setting_validation_reads_is_part_of_the_digest() -> None:
    host_path = with_changes(valid_manifest(), {"spec.storage.output": {"hostPath": "/data/x"}})
    shared = VerdictCache()
    verdicts = []
    for allowed in (False, True):
        settings = PolicySettings.of(OperatorConfig(allow_host_path=allowed))
        validator = DeadlineValidator(
            lambda spec, s=settings: policy_problems(spec, s),
            timeout=60,
            settings=repr(settings),
            verdicts=shared,
        )
        verdicts.append(validator.validate(host_path))
        validator.shutdown()
    assert [p.path for p in verdicts[0].problems] == ["spec.storage.output.hostPath"]
    assert verdicts[1].problems == []  # not the remembered refusal


def test_the_operator_validation_reads_no_model_file(tmp_path: Path) -> None:
    """The one thing kuberl_api validation can read beside the document, a model's local
    config.json, is off in the operator: the verdict is the same with or without the file."""
    model = tmp_path / "model"
    manifest = with_changes(valid_manifest(), {MODEL: str(model), FREEZE: True})
    policy = PolicySettings.of(OperatorConfig())
    absent = validate_manifest(manifest, lambda spec: policy_problems(spec, policy))
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama"}))
    here = validate_document(parse_document(manifest))  # the CLI's validation reads it
    assert any("freeze_vision_tower" in p.path for p in here.errors), here.errors
    present = validate_manifest(manifest, lambda spec: policy_problems(spec, policy))
    assert absent.problems == present.problems == []
    assert absent.effective == present.effective
