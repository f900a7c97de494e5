"""Kueue on the fake harness: queued clusters, admission, eviction without a charged retry."""

import pytest

from kuberl_operator.kueue import LABEL_PRIORITY
from kuberl_operator.names import LABEL_QUEUE


@pytest.fixture
def queued(harness):
    harness.set_spec(
        {
            "spec.scheduling": {"queueName": "team-q", "workloadPriorityClass": "low"},
            "spec.runPolicy": {"backoffLimit": 1, "preRunningDeadlineSeconds": 600},
        }
    )
    return harness


def _admit(harness, name):
    harness.kube.rayclusters[name]["spec"]["suspend"] = False
    harness.make_cluster_ready()


def _evict(harness, name):
    rc = harness.kube.rayclusters[name]
    rc["spec"]["suspend"] = True
    rc["status"] = {"state": "suspended", "conditions": []}


def test_a_queued_cluster_is_created_suspended_with_queue_and_priority(queued):
    status = queued.reconcile()
    rc = queued.kube.rayclusters["grpo-a1"]
    assert rc["spec"]["suspend"] is True
    assert rc["metadata"]["labels"][LABEL_QUEUE] == "team-q"
    assert rc["metadata"]["labels"][LABEL_PRIORITY] == "low"
    assert queued.condition("Queued")["status"] == "True"
    assert queued.condition("Admitted")["status"] == "False"
    assert "queued in Kueue LocalQueue team-q" in status["message"]


def test_queue_time_does_not_count_against_the_pre_running_deadline(queued):
    queued.reconcile()
    queued.advance(3600)  # an hour waiting for quota
    assert queued.reconcile()["attempts"][0]["result"] == "Running"
    _admit(queued, "grpo-a1")
    queued.reconcile()
    assert queued.condition("Admitted")["status"] == "True"
    assert queued.condition("Queued")["status"] == "False"
    assert queued.ray.submissions, "submitted once admitted and ready"
    queued.advance(601)  # admitted 601 s ago and still PENDING: now it counts
    assert queued.reconcile()["attempts"][0]["reason"] == "PreRunningDeadlineExceeded"


def test_eviction_stops_the_attempt_without_charging_a_retry_and_resumes(queued):
    queued.reconcile()
    _admit(queued, "grpo-a1")
    queued.reconcile()
    queued.ray.jobs["grpo-1"]["status"] = "RUNNING"
    queued.report_progress(4, checkpoint=4)
    queued.reconcile()
    for _ in range(3):  # three preemptions in a row, under backoffLimit 1
        index = queued.status["attempts"][-1]["index"]
        queued.advance(10)
        _evict(queued, "grpo-a1")
        status = queued.reconcile()
        evicted = status["attempts"][-1]
        assert evicted["index"] == index
        assert (evicted["result"], evicted["reason"]) == ("Stopped", "Evicted")
        assert status["restarts"] == 0 and status["phase"] == "Provisioning"
        assert queued.condition("Queued")["reason"] == "Evicted"
        assert "grpo-a1" in queued.kube.rayclusters, "the suspended cluster keeps its queue place"
        status = queued.reconcile()
        assert status["attempts"][-1]["index"] == index + 1
        assert status["attempts"][-1]["rayCluster"] == "grpo-a1"
        assert status["attempts"][-1]["resumedFromStep"] == 4
        assert queued.condition("Admitted")["status"] == "False"
        _admit(queued, "grpo-a1")
        queued.reconcile()
        sid = queued.status["rayJob"]["submissionId"]
        assert sid == f"grpo-{index + 1}"
        queued.ray.jobs[sid]["status"] = "RUNNING"
        queued.reconcile()
    assert queued.status["phase"] == "Running" and queued.status["restarts"] == 0
    assert ("RayCluster", "grpo-a2") not in queued.kube.created
    submitted = [s["submission_id"] for s in queued.ray.submissions]
    assert submitted == ["grpo-1", "grpo-2", "grpo-3", "grpo-4"]


def test_an_unqueued_job_is_not_suspended(harness):
    harness.reconcile()
    rc = harness.kube.rayclusters["grpo-a1"]
    assert "suspend" not in rc["spec"] and LABEL_QUEUE not in rc["metadata"]["labels"]
    assert harness.condition("Queued") is None


def test_the_head_is_scheduled_like_the_workers_and_volcano_gets_a_podgroup(harness):
    harness.set_spec({"spec.workerPools[0].schedulerName": "volcano"})
    harness.reconcile()
    rc = harness.kube.rayclusters["grpo-a1"]
    assert rc["spec"]["headGroupSpec"]["template"]["spec"]["schedulerName"] == "volcano"
    worker = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["schedulerName"] == "volcano"
    # Volcano schedules the pools: the gang's PodGroup exists before the RayCluster's pods.
    created = harness.kube.created
    assert created.index(("PodGroup", "grpo-a1-pg")) < created.index(("RayCluster", "grpo-a1"))


def test_a_priority_without_a_queue_is_refused(harness):
    harness.set_spec({"spec.scheduling": {"workloadPriorityClass": "high"}})
    harness.reconcile()
    validated = harness.condition("Validated")
    assert validated["status"] == "False" and "queueName" in validated["message"]
