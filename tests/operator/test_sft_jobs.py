"""An RLTrainingJob carrying verl's SFT config (spec.sft_config) through reconcile: validated,
a RayCluster from its pools, its SFT plan submitted to `kuberl train --plan`, progress and
checkpoints in status, and a failed attempt resumed from the newest checkpoint."""

from typing import Any

import pytest

from kuberl_api.plan.sft import SFTPlan
from support.manifests import valid_sft_manifest, with_changes
from tests.operator.conftest import Harness


def plan_of(submission: dict[str, Any]) -> SFTPlan:
    return SFTPlan.from_json(submission["runtime_env"]["env_vars"]["KUBERL_PLAN_JSON"])


@pytest.fixture
def sft(config) -> Harness:
    return Harness(with_changes(valid_sft_manifest(), {"metadata.name": "sft"}), config)


def test_an_sft_job_is_validated_and_submitted_with_its_sft_config(sft):
    sid = sft.run_until_running()
    validated = sft.condition("Validated")
    assert validated["status"] == "True" and "sft_config" in validated["message"]
    assert sft.status["accelerators"] == "4xnvidia.com/gpu"
    [raycluster] = sft.kube.rayclusters.values()
    assert raycluster["metadata"]["name"] == "sft-a1"
    [submission] = sft.ray.submissions
    assert submission["submission_id"] == sid == "sft-1"
    submitted = plan_of(submission)  # an SFT plan: refused by SFTPlan.from_json otherwise
    assert submitted.paths.output_dir == "/mnt/af/t" and submitted.model.path == "/models/m"
    assert submitted.paths.checkpoint_dir == "/mnt/af/t/checkpoints"
    assert sft.status["phase"] == "Running"


def test_a_failed_sft_attempt_resumes_from_the_newest_checkpoint(sft):
    sid = sft.run_until_running()
    sft.report_progress(6, checkpoint=5)
    sft.reconcile()
    sft.ray.finish(sid, "FAILED", 1, logs="Traceback\nRuntimeError: node lost")
    assert sft.reconcile()["phase"] == "Restarting"
    sft.advance(11)  # past the 10 s backoff
    status = sft.reconcile()
    assert status["attempts"][1]["resumedFromStep"] == 5
    sft.make_cluster_ready()
    sft.reconcile()
    second = sft.ray.submissions[1]
    assert second["submission_id"] == "sft-2"
    assert plan_of(second).trainer.resume_mode == "auto"


def test_an_sft_job_succeeds_with_its_progress(sft):
    sid = sft.run_until_running()
    sft.report_progress(10, checkpoint=10)
    sft.ray.finish(sid, "SUCCEEDED", 0)
    status = sft.reconcile()
    assert status["phase"] == "Succeeded"
    assert status["progress"]["globalStep"] == 10 and status["checkpoint"]["latestStep"] == 10


def test_an_invalid_sft_config_fails_validation_naming_the_key(sft):
    sft.set_spec({"spec.sft_config.data.max_lenght": 512})
    status = sft.reconcile()
    assert status["phase"] == "Failed" and sft.kube.created == []
    message = sft.condition("Validated")["message"]
    assert "spec.sft_config.data.max_lenght" in message and "max_length" in message
