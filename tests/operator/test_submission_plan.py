"""The operator and the runtime agree on the run plan: what an attempt submits plans, in the
runtime, to exactly the plan the operator decided (resume switched on from attempt 2), for an
RL job and for an SFT job alike."""

import pytest
import yaml

from kuberl_api.plan import build_run_plan
from kuberl_api.plan.sft import SFTPlan, build_sft_plan
from kuberl_api.validation import parse_document, validate_document
from kuberl_operator.builders import build_submission
from kuberl_operator.builders.common import JobRef
from kuberl_operator.builders.submission import plan_for_attempt
from support.manifests import valid_manifest, valid_sft_manifest

JOB = JobRef(name="grpo", namespace="team-a", uid="uid-123")


@pytest.mark.parametrize("attempt", [1, 2])
def test_the_submitted_config_plans_to_the_operators_plan(attempt):
    result = validate_document(parse_document(valid_manifest()))
    assert result.ok, [p.render() for p in result.errors]
    operator_plan = plan_for_attempt(result.backend_config, result.af_output_dir, attempt)
    payload = build_submission(JOB, result.af_output_dir, result.backend_config, attempt)
    submitted = yaml.safe_load(payload["runtime_env"]["env_vars"]["KUBERL_CONFIG_YAML"])
    again = validate_document(parse_document(submitted))
    assert again.ok, [p.render() for p in again.problems]
    runtime_plan = build_run_plan(again.backend_config, again.af_output_dir)
    assert runtime_plan.model_dump(exclude={"source"}) == operator_plan.model_dump(
        exclude={"source"}
    )
    if attempt > 1:
        assert runtime_plan.trainer.resume_mode == "auto"
    assert payload["entrypoint"].startswith(f"mkdir -p {operator_plan.paths.output_dir}/")


@pytest.mark.parametrize("attempt", [1, 2])
def test_an_sft_job_submits_its_sft_config_and_resumes_from_attempt_2(attempt):
    result = validate_document(parse_document(valid_sft_manifest()))
    assert result.ok, [p.render() for p in result.errors]
    operator_plan = plan_for_attempt(result.sft_config, result.af_output_dir, attempt)
    assert isinstance(operator_plan, SFTPlan)
    payload = build_submission(JOB, result.af_output_dir, result.sft_config, attempt)
    submitted = yaml.safe_load(payload["runtime_env"]["env_vars"]["KUBERL_CONFIG_YAML"])
    # What `kuberl train` reads: a ModelArts envelope whose backend_config is the SFT tree.
    assert submitted["af_output_dir"] == "/mnt/af/t" and "model" in submitted["backend_config"]
    again = validate_document(parse_document(submitted))
    assert again.ok, [p.render() for p in again.problems]
    assert again.sft_config is not None
    assert build_sft_plan(again.sft_config, again.af_output_dir) == operator_plan
    assert (operator_plan.placement.world_size, operator_plan.placement.device) == (4, "cuda")
    assert payload["submission_id"] == f"grpo-{attempt}"
    assert payload["entrypoint"].endswith(f"kuberl train /mnt/af/t/.kuberl/grpo-{attempt}.yaml")


def test_a_second_sft_attempt_resumes_even_when_the_job_said_disable():
    manifest = valid_sft_manifest()
    manifest["spec"]["sft_config"]["trainer"]["resume_mode"] = "disable"
    result = validate_document(parse_document(manifest))
    assert plan_for_attempt(result.sft_config, "/mnt/af/t", 1).trainer.resume_mode == "disable"
    assert plan_for_attempt(result.sft_config, "/mnt/af/t", 2).trainer.resume_mode == "auto"
