"""Chaining on the real control plane: a GRPO job naming an SFT job in spec.dependsOn waits,
visibly, until that job succeeded, then starts; a failed dependency fails it. The Ray side is the
fake Jobs API (support/fake_dashboard.py): the test decides when each Ray job ends."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.fake_dashboard import FakeDashboard, operator_on
from support.rljobs import Jobs, fake_job, wait_for

pytestmark = pytest.mark.cluster

WAITING = "WaitingForDependency"


@pytest.fixture
def dashboard() -> Iterator[FakeDashboard]:
    fake = FakeDashboard()
    yield fake
    fake.close()


@pytest.fixture
def chain_jobs(
    kube_api: Any, local_cluster: Any, job_namespace: str, dashboard: FakeDashboard,
    tmp_path: Path,
) -> Iterator[Jobs]:  # fmt: skip
    with operator_on(local_cluster.kubeconfig, job_namespace, dashboard, tmp_path / "op.log"):
        yield Jobs(kube_api, job_namespace)


def _grpo_after(name: str, sft: str, tmp_path: Path) -> dict:
    body = fake_job(name, tmp_path / name, "fake-steps-1-1")
    body["spec"]["dependsOn"] = [{"name": sft}]
    # The warm start: the SFT job's exported model.
    model = body["spec"]["backend_config"]["actor_rollout_ref"]["model"]
    model["path"] = str(tmp_path / sft / "huggingface")
    return body


def _clusters_of(jobs: Jobs, name: str) -> list[dict]:
    return [
        rc for rc in jobs.rayclusters() if rc["metadata"]["labels"].get("kuberl.io/job") == name
    ]


def test_a_job_waits_for_its_dependency_then_starts(chain_jobs, dashboard, tmp_path):
    jobs = chain_jobs
    jobs.apply(_grpo_after("grpo", "sft", tmp_path))
    waiting = wait_for(
        "grpo waiting for a job that does not exist yet",
        lambda: (c := jobs.condition("grpo", WAITING)).get("status") == "True" and c,
        timeout=120,
    )
    assert "RLTrainingJob sft (not found)" in waiting["message"]
    assert jobs.status("grpo")["phase"] == "Pending"

    jobs.apply(fake_job("sft", tmp_path / "sft", "fake-steps-1-1"))
    wait_for("sft-1 submitted", lambda: "sft-1" in dashboard.submissions, timeout=300)
    message = wait_for(
        "grpo waiting on the running sft job",
        lambda: "phase" in (m := jobs.condition("grpo", WAITING).get("message", "")) and m,
        timeout=60,
    )
    assert "RLTrainingJob sft (phase" in message
    assert jobs.status("grpo")["phase"] == "Pending"
    assert _clusters_of(jobs, "grpo") == [] and "grpo-1" not in dashboard.submissions

    dashboard.finish("sft-1", "SUCCEEDED")
    jobs.wait_phase("sft", "Succeeded", timeout=120)
    wait_for("grpo-1 submitted", lambda: "grpo-1" in dashboard.submissions, timeout=300)
    done = jobs.condition("grpo", WAITING)
    assert done["status"] == "False" and done["reason"] == "DependenciesSucceeded"


def test_a_failed_dependency_fails_the_job(chain_jobs, dashboard, tmp_path):
    jobs = chain_jobs
    jobs.apply(fake_job("sft-bad", tmp_path / "sft-bad", "fake-steps-1-1", backoffLimit=0))
    jobs.apply(_grpo_after("grpo-bad", "sft-bad", tmp_path))
    wait_for("sft-bad-1 submitted", lambda: "sft-bad-1" in dashboard.submissions, timeout=300)
    dashboard.finish("sft-bad-1", "FAILED")
    jobs.wait_phase("sft-bad", "Failed", timeout=120)
    status = jobs.wait_phase("grpo-bad", "Failed", timeout=120)
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DependencyFailed"
    assert "RLTrainingJob sft-bad failed" in failed["message"]
    assert _clusters_of(jobs, "grpo-bad") == [] and "grpo-bad-1" not in dashboard.submissions
