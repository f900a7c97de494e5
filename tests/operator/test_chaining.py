"""``spec.dependsOn``: wait (Pending, WaitingForDependency) until the named jobs succeeded."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kuberl_operator.chaining import WAITING_FOR_DEPENDENCY, judge_dependencies
from support.manifests import valid_manifest, with_changes
from tests.operator.conftest import NAMESPACE, Harness


def job(name: str, phase: str | None, message: str = "", depends_on: list[str] = ()) -> dict:
    body = with_changes(valid_manifest(), {"metadata.name": name})
    body["metadata"].update(namespace=NAMESPACE, uid=f"{name}-uid", generation=1)
    body["spec"]["dependsOn"] = [{"name": n} for n in depends_on]
    if phase is not None:
        body["status"] = {"phase": phase, "message": message}
    return body


@pytest.mark.parametrize(
    ("deps", "outcome", "reason", "words"),
    [
        ([("sft", None)], "waiting", WAITING_FOR_DEPENDENCY, "RLTrainingJob sft (not found)"),
        ([("sft", job("sft", "Running"))], "waiting", WAITING_FOR_DEPENDENCY, "phase Running"),
        ([("sft", job("sft", None))], "waiting", WAITING_FOR_DEPENDENCY, "phase Pending"),
        ([("sft", job("sft", "Succeeded"))], "ready", "DependenciesSucceeded", "sft succeeded"),
        (
            [("a", job("a", "Succeeded")), ("b", job("b", "Failed", "OOMKilled"))],
            "failed",
            "DependencyFailed",
            "RLTrainingJob b failed: OOMKilled",
        ),
        ([("grpo", job("grpo", None))], "failed", "DependencyCycle", "depends on itself"),
        (
            [("sft", job("sft", "Pending", depends_on=["grpo"]))],
            "failed",
            "DependencyCycle",
            "sft depends on this job",
        ),
    ],
)
def test_the_verdict_names_the_job_and_why(deps, outcome, reason, words):
    verdict = judge_dependencies("grpo", deps)
    assert (verdict.outcome, verdict.reason) == (outcome, reason)
    assert words in verdict.message


@pytest.fixture
def chained(config) -> Harness:
    return Harness(job("grpo", None, depends_on=["sft"]), config)


def _set_dependency(harness: Harness, body: dict[str, Any] | None) -> None:
    if body is None:
        harness.kube.jobs.pop("sft", None)
    else:
        harness.kube.jobs["sft"] = copy.deepcopy(body)


def test_waits_pending_until_the_dependency_succeeds_then_starts(chained):
    status = chained.reconcile()
    assert status["phase"] == "Pending" and "sft (not found)" in status["message"]
    waiting = chained.condition(WAITING_FOR_DEPENDENCY)
    assert waiting["status"] == "True" and "RLTrainingJob sft" in waiting["message"]
    assert chained.kube.created == []

    _set_dependency(chained, job("sft", "Running"))
    status = chained.reconcile()
    assert status["phase"] == "Pending" and "phase Running" in status["message"]
    assert chained.kube.created == [] and not status.get("attempts")

    _set_dependency(chained, job("sft", "Succeeded"))
    status = chained.reconcile()
    assert status["phase"] == "Provisioning"
    assert chained.condition(WAITING_FOR_DEPENDENCY)["status"] == "False"
    assert [kind for kind, _ in chained.kube.created].count("RayCluster") == 1


def test_a_failed_dependency_fails_the_job_with_its_reason(chained):
    _set_dependency(chained, job("sft", "Failed", "BackoffLimitExceeded: 3 attempts failed"))
    status = chained.reconcile()
    assert status["phase"] == "Failed"
    failed = chained.condition("Failed")
    assert failed["reason"] == "DependencyFailed" and "sft failed" in failed["message"]
    assert chained.kube.created == []


def test_a_started_job_no_longer_looks_at_its_dependencies(chained):
    _set_dependency(chained, job("sft", "Succeeded"))
    chained.reconcile()
    _set_dependency(chained, None)  # the SFT job was deleted after the GRPO job started
    status = chained.reconcile()
    assert status["phase"] == "Provisioning"


def test_a_cycle_of_any_length_fails_naming_its_path(config):
    harness = Harness(job("a", None, depends_on=["b"]), config)
    harness.kube.jobs["b"] = job("b", "Pending", depends_on=["c"])
    harness.kube.jobs["c"] = job("c", "Pending", depends_on=["x", "a"])
    status = harness.reconcile()
    assert status["phase"] == "Failed"
    failed = harness.condition("Failed")
    assert failed["reason"] == "DependencyCycle"
    assert "a -> b -> c -> a" in failed["message"]
    assert harness.kube.created == []


def test_a_cycle_is_named_even_after_another_of_its_jobs_failed_for_it(config):
    """The cycle's jobs are reconciled in any order: the last one still says why, not only
    that its dependency failed."""
    harness = Harness(job("a", None, depends_on=["b"]), config)
    harness.kube.jobs["b"] = job("b", "Failed", depends_on=["c"])  # failed DependencyCycle
    harness.kube.jobs["c"] = job("c", "Pending", depends_on=["a"])
    assert harness.reconcile()["phase"] == "Failed"
    failed = harness.condition("Failed")
    assert failed["reason"] == "DependencyCycle" and "a -> b -> c -> a" in failed["message"]


def test_a_long_chain_without_a_cycle_just_waits(config):
    harness = Harness(job("j0", None, depends_on=["j1"]), config)
    for i in range(1, 100):
        harness.kube.jobs[f"j{i}"] = job(f"j{i}", "Pending", depends_on=[f"j{i + 1}"])
    assert harness.reconcile()["phase"] == "Pending"


def test_a_recorded_success_survives_the_dependencys_deletion(config):
    harness = Harness(job("grpo", None, depends_on=["sft", "rm"]), config)
    harness.kube.jobs["sft"] = job("sft", "Succeeded")
    harness.kube.jobs["rm"] = job("rm", "Running")
    assert harness.reconcile()["phase"] == "Pending"
    assert harness.condition("DependenciesSucceeded")["message"] == "seen Succeeded: sft"
    del harness.kube.jobs["sft"]  # its ttlSecondsAfterFinished
    harness.advance(7200)
    assert harness.reconcile()["phase"] == "Pending"  # waits for rm only, past any deadline
    harness.kube.jobs["rm"] = job("rm", "Succeeded")
    assert harness.reconcile()["phase"] == "Provisioning"
    assert harness.condition("DependenciesSucceeded")["message"] == "seen Succeeded: rm, sft"


def test_a_dependency_that_never_existed_fails_after_the_deadline(chained):
    chained.reconcile()
    chained.advance(3600)
    assert chained.reconcile()["phase"] == "Pending"
    chained.advance(2)
    status = chained.reconcile()
    assert status["phase"] == "Failed"
    failed = chained.condition("Failed")
    assert failed["reason"] == "DependencyNotFound"
    assert "RLTrainingJob sft not found 3600s" in failed["message"]
    assert "remove it from spec.dependsOn" in failed["message"]
