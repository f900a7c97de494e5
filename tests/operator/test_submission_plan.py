"""The operator ships the plan it resolved: an attempt's submission carries the plan's JSON
(``plan_version``, the validated document's digest), the runtime's loader reads back exactly
the operator's plan (resume switched on from attempt 2), and ``kuberl train CONFIG`` resolves
the same document to the same plan; for an RL job and an SFT job alike."""

import json

import pytest

from kuberl_api.plan import RunPlan
from kuberl_api.plan.from_document import plan_document
from kuberl_api.plan.sft import SFTPlan
from kuberl_api.plan.version import PLAN_VERSION, document_digest
from kuberl_api.validation import parse_document, validate_document
from kuberl_operator.builders import build_submission
from kuberl_operator.builders.common import JobRef
from kuberl_operator.builders.submission import PLAN_ENV, plan_for_attempt
from kuberl_runtime.config import RunConfig
from support.manifests import valid_manifest, valid_sft_manifest

JOB = JobRef(name="grpo", namespace="team-a", uid="uid-123")


def shipped(payload: dict) -> str:
    return payload["runtime_env"]["env_vars"][PLAN_ENV]


def rl_job() -> dict:
    return valid_manifest()


def sft_job() -> dict:
    return valid_sft_manifest()


def no_resume(manifest) -> dict:
    """The job says resume_mode: disable, so attempt 2's switch to auto shows."""
    body = manifest()
    spec = body["spec"]
    config = spec["backend_config"] if "backend_config" in spec else spec["sft_config"]
    config.setdefault("trainer", {})["resume_mode"] = "disable"
    return body


@pytest.mark.parametrize(("manifest", "plan_type"), [(rl_job, RunPlan), (sft_job, SFTPlan)])
@pytest.mark.parametrize("attempt", [1, 2])
def test_the_submission_carries_the_operators_plan(manifest, plan_type, attempt):
    result = validate_document(parse_document(no_resume(manifest)))
    assert result.ok, [p.render() for p in result.errors]
    config = result.effective_config
    operator_plan = plan_for_attempt(config, result.af_output_dir, attempt)
    payload = build_submission(JOB, result.af_output_dir, config, attempt)
    raw = json.loads(shipped(payload))
    assert raw["plan_version"] == PLAN_VERSION
    digest = document_digest(json.loads(config.model_dump_json()), result.af_output_dir)
    assert raw["source_digest"] == digest and digest.startswith("sha256:") and len(digest) == 71
    runtime = RunConfig.from_json(shipped(payload))  # what `kuberl train --plan` loads
    assert isinstance(runtime.plan, plan_type)
    assert runtime.plan == operator_plan  # every field, the source and the digest included
    assert runtime.plan.trainer.resume_mode == ("auto" if attempt > 1 else "disable")
    assert payload["metadata"]["kuberl.io/source-digest"] == digest
    path = f"/mnt/af/t/.kuberl/grpo-{attempt}.plan.json"
    assert payload["entrypoint"] == (
        f'mkdir -p /mnt/af/t/.kuberl && printf "%s\\n" "${PLAN_ENV}" > {path} '
        f"&& exec kuberl train --plan {path}"
    )


@pytest.mark.parametrize("manifest", [rl_job, sft_job])
def test_kuberl_train_config_resolves_the_document_to_the_operators_first_plan(manifest):
    local = plan_document(parse_document(manifest()), allow_env=True).plan  # kuberl train CONFIG
    result = validate_document(parse_document(manifest()))
    assert local == plan_for_attempt(result.effective_config, result.af_output_dir, 1)


def test_every_attempt_names_the_same_document_and_another_spec_another():
    result = validate_document(parse_document(no_resume(rl_job)))
    first, fifth = (
        plan_for_attempt(result.backend_config, "/mnt/af/t", attempt) for attempt in (1, 5)
    )
    assert first.source_digest == fifth.source_digest
    assert first.source["trainer"]["resume_mode"] != fifth.source["trainer"]["resume_mode"]
    changed = no_resume(rl_job)
    changed["spec"]["backend_config"]["data"]["train_batch_size"] *= 2
    other = validate_document(parse_document(changed))
    assert other.ok, [p.render() for p in other.errors]
    assert plan_for_attempt(other.backend_config, "/mnt/af/t", 1).source_digest != (
        first.source_digest
    )


def test_a_second_sft_attempt_resumes_even_when_the_job_said_disable():
    manifest = valid_sft_manifest()
    manifest["spec"]["sft_config"]["trainer"]["resume_mode"] = "disable"
    result = validate_document(parse_document(manifest))
    assert plan_for_attempt(result.sft_config, "/mnt/af/t", 1).trainer.resume_mode == "disable"
    assert plan_for_attempt(result.sft_config, "/mnt/af/t", 2).trainer.resume_mode == "auto"


def test_an_env_interpolation_is_read_where_the_job_trains_and_never_shipped(monkeypatch):
    """`${oc.env:...}` reads the environment of whoever resolves the job. `kuberl train CONFIG`
    resolves it on the machine that trains, and its plan holds the value; the operator, which
    would read its own environment, refuses the job (Validated=False), so no plan it ships can
    hold an interpolation or another process's value."""
    monkeypatch.setenv("KUBERL_TEST_EPOCHS", "3")
    manifest = rl_job()
    manifest["spec"]["backend_config"].setdefault("trainer", {})["total_epochs"] = (
        "${oc.decode:${oc.env:KUBERL_TEST_EPOCHS}}"
    )
    local = plan_document(parse_document(manifest), allow_env=True).plan
    assert local.trainer.total_epochs == 3 and "oc.env" not in local.to_json()
    refused = validate_document(parse_document(manifest))  # the operator's validation
    (error,) = [p for p in refused.errors if p.path.endswith("trainer.total_epochs")]
    assert "operator's own environment" in error.message and error.hint
    assert refused.effective_config is None  # nothing for build_submission to plan
