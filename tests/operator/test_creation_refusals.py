"""The API server's refusals become a Failed attempt with its reason, never a silent retry loop
(issue 29 item 4): a create refused with 422/403, and pods KubeRay could not create."""

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kuberl_operator.provisioning import pod_creation_failure


def api_error(status: int, message: str) -> ApiException:
    err = ApiException(status=status, reason="Refused")
    err.body = json.dumps({"kind": "Status", "status": "Failure", "message": message})
    return err


INVALID = 'RayCluster.ray.io "grpo-a1" is invalid: spec.headGroupSpec: Invalid value'
DENIED = 'admission webhook "policy.example.com" denied the request: no GPUs in team-a'
QUOTA = 'rayclusters.ray.io "grpo-a1" is forbidden: exceeded quota: team-a, requested: count=1'


@pytest.mark.parametrize(
    ("status", "message", "reason", "phase"),
    [
        (422, INVALID, "CreationRefused", "Failed"),
        (403, DENIED, "CreationRefused", "Failed"),
        (403, QUOTA, "QuotaExceeded", "Restarting"),
    ],
)
def test_a_refused_create_fails_the_attempt_with_the_api_servers_words(
    harness: Any, status: int, message: str, reason: str, phase: str
) -> None:
    harness.kube.refuse["RayCluster"] = api_error(status, message)
    harness.reconcile()
    attempt = harness.status["attempts"][0]
    assert attempt["result"] == "Failed" and attempt["reason"] == reason
    assert f"(HTTP {status}): {message}" in attempt["message"]
    assert harness.status["phase"] == phase
    # config refusals end the job; a quota is retried with backoff, bounded by backoffLimit
    assert attempt["failureClass"] == ("infra" if reason == "QuotaExceeded" else "config")


def test_a_quota_refusal_is_retried_only_up_to_the_backoff_limit(harness: Any) -> None:
    harness.set_spec({"spec.runPolicy": {"backoffLimit": 1}})
    harness.kube.refuse["Secret"] = api_error(403, QUOTA)
    harness.reconcile()
    harness.advance(3600)
    harness.reconcile()
    assert harness.status["phase"] == "Failed"
    assert [a["reason"] for a in harness.status["attempts"]] == ["QuotaExceeded"] * 2
    assert harness.kube.rayclusters == {}


def test_a_server_error_is_a_reconcile_error_not_a_verdict(harness: Any) -> None:
    harness.kube.refuse["RayCluster"] = api_error(503, "etcd leader changed")
    with pytest.raises(ApiException):
        harness.reconcile()


def kuberay_failed(reason: str, message: str) -> dict[str, Any]:
    condition = {"type": "ReplicaFailure", "status": "True", "reason": reason, "message": message}
    return {"status": {"conditions": [condition]}}


POD_422 = 'Pod "grpo-a1-head-x" is invalid: spec.containers[0].env[0].name: Invalid value: "A=B"'


def test_pods_kuberay_could_not_create_fail_the_attempt(harness: Any) -> None:
    harness.reconcile()
    (cluster,) = harness.kube.rayclusters.values()
    cluster.update(kuberay_failed("FailedCreateHeadPod", POD_422))
    harness.reconcile()
    attempt = harness.status["attempts"][0]
    assert attempt["reason"] == "PodCreationRefused" and POD_422 in attempt["message"]
    assert harness.status["phase"] == "Failed"


def test_pod_creation_failure_reads_only_kuberays_create_reasons() -> None:
    assert pod_creation_failure(kuberay_failed("FailedDeleteWorkerPod", "x")) is None
    assert pod_creation_failure({"status": {}}) is None
    quota = pod_creation_failure(kuberay_failed("FailedCreateWorkerPod", "exceeded quota: q"))
    assert quota is not None and quota.reason == "PodCreationRefused"
    assert quota.cls.value == "infra"
