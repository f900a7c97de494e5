"""Every wait has an end and says so (issue 29 item 4): a Kueue hold, a RayCluster of the same
name another job owns; the default deadlines of waits.py, on the fake harness."""

from typing import Any

import pytest


@pytest.fixture
def queued(harness: Any) -> Any:
    harness.set_spec({"spec.scheduling": {"queueName": "team-q"}})
    return harness


def test_a_kueue_hold_says_until_when_and_fails_after_it(queued: Any) -> None:
    queued.reconcile()
    message = queued.condition("Queued")["message"]
    assert "LocalQueue team-q" in message
    assert "fails QueueDeadlineExceeded if not admitted by 2026-11-08T12:00:00Z" in message
    queued.advance(7 * 86400)
    assert queued.reconcile()["attempts"][0]["result"] == "Running"
    queued.advance(2)
    status = queued.reconcile()
    attempt = status["attempts"][0]
    assert attempt["reason"] == "QueueDeadlineExceeded"
    assert "check the LocalQueue" in attempt["message"]
    assert status["phase"] == "Failed" and "grpo-a1" not in queued.kube.rayclusters


def test_an_admitted_job_is_not_held_to_the_queue_deadline(queued: Any) -> None:
    queued.reconcile()
    queued.advance(3 * 86400)
    queued.kube.rayclusters["grpo-a1"]["spec"]["suspend"] = False
    queued.make_cluster_ready()
    queued.reconcile()
    queued.advance(5 * 86400)
    sid = queued.status["rayJob"]["submissionId"]
    queued.ray.jobs[sid]["status"] = "RUNNING"
    queued.report_progress(1)
    assert queued.reconcile()["attempts"][0]["result"] == "Running"


def _stale(harness: Any) -> None:
    harness.kube.rayclusters["grpo-a1"] = {
        "metadata": {"name": "grpo-a1", "ownerReferences": [{"uid": "another-job"}]},
        "spec": {},
    }


def test_a_stale_cluster_of_another_job_is_waited_for_with_a_deadline(harness: Any) -> None:
    harness.reconcile()
    _stale(harness)
    assert (
        "owned by another job, to go (until 2026-11-01T12:10:00Z"
        in (harness.reconcile()["message"])
    )
    harness.advance(601)
    status = harness.reconcile()
    assert status["attempts"][0]["reason"] == "StaleClusterOwner"
    assert status["phase"] == "Restarting"
    owner = harness.kube.rayclusters["grpo-a1"]["metadata"]["ownerReferences"][0]["uid"]
    assert owner == "another-job", "the other job's cluster is left alone"
    harness.advance(60)
    status = harness.reconcile()
    assert status["attempts"][-1]["rayCluster"] == "grpo-a2"


def test_each_wait_is_a_flag_and_zero_means_no_deadline(manifest: Any) -> None:
    import argparse

    from kuberl_operator.config import OperatorConfig, add_arguments, from_args
    from tests.operator.conftest import Harness

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--queue-deadline", "0", "--stale-owner-deadline", "30"])
    config = from_args(args)
    assert config.waits.queue_seconds == 0 and config.waits.stale_owner_seconds == 30
    assert config.waits.pre_running_seconds == 3600
    queued = Harness(manifest, OperatorConfig(waits=config.waits))
    queued.set_spec({"spec.scheduling": {"queueName": "team-q"}})
    queued.reconcile()
    queued.advance(60 * 86400)
    assert queued.reconcile()["attempts"][0]["result"] == "Running"
    assert queued.condition("Queued")["message"] == "LocalQueue team-q"
