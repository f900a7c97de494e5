"""On the real API server, with the chart's admission policy and a job's real runtime token:
the runtime may change its progress and checkpoint, nothing else of its job's status; and the
Ray pods kuberl builds pass Pod Security `restricted`."""

from typing import Any

import pytest

from kuberl_api.job import GROUP, PLURAL, VERSION
from kuberl_operator.builders import JobRef, build_raycluster, build_runtime_rbac
from support.manifests import valid_manifest, with_changes

pytestmark = pytest.mark.cluster


def _create_job(kube_api: Any, namespace: str, name: str) -> JobRef:
    from kubernetes import client

    custom = client.CustomObjectsApi(kube_api)
    body = with_changes(valid_manifest(), {"metadata.name": name})
    body["metadata"]["namespace"] = namespace
    created = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    status = {"phase": "Running", "restarts": 2, "attempts": [{"index": 3, "submissionId": "x"}]}
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, name, {"status": status}
    )
    return JobRef(name, namespace, created["metadata"]["uid"])


def _apply(kube_api: Any, obj: dict[str, Any]) -> None:
    from kubernetes import utils

    utils.create_from_dict(kube_api, obj)


@pytest.fixture
def runtime(operator_kubeconfig: str, kube_api: Any, job_namespace: str, token_kubeconfig: Any):
    """The job's runtime identity exactly as the operator creates it, and a client with its
    token; `operator_kubeconfig` installed the chart, admission policy included."""
    from kubernetes import client, config

    job = _create_job(kube_api, job_namespace, "mine")
    for obj in build_runtime_rbac(job):
        _apply(kube_api, obj)
    path = token_kubeconfig(job_namespace, "mine-runtime")
    return client.CustomObjectsApi(config.new_client_from_config(config_file=str(path)))


def _patch(api: Any, namespace: str, status: dict[str, Any]) -> None:
    api.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "mine", {"status": status}
    )


def _status(kube_api: Any, namespace: str) -> dict[str, Any]:
    from kubernetes import client

    job = client.CustomObjectsApi(kube_api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "mine"
    )
    return job["status"]


def _wait_policy_active(runtime: Any, namespace: str) -> None:
    """A new ValidatingAdmissionPolicy takes a moment to be enforced: poll until it is."""
    from kubernetes.client.exceptions import ApiException

    from support.rljobs import wait_for

    def refused() -> bool:
        try:
            _patch(runtime, namespace, {"message": "probe"})
        except ApiException as err:
            return err.status in (403, 422)
        return False

    wait_for("the runtime-status admission policy to be enforced", refused, timeout=60)


@pytest.mark.parametrize(
    "forged",
    [
        {"phase": "Succeeded"},
        {"restarts": 0},
        {"attempts": []},
        {
            "conditions": [
                {
                    "type": "Succeeded",
                    "status": "True",
                    "reason": "Forged",
                    "message": "",
                    "lastTransitionTime": "2026-11-01T00:00:00Z",
                }
            ]
        },
    ],
    ids=["phase", "restarts", "attempts", "conditions"],
)
def test_the_runtime_cannot_forge_operator_state(runtime, kube_api, job_namespace, forged):
    from kubernetes.client.exceptions import ApiException

    _wait_policy_active(runtime, job_namespace)
    with pytest.raises(ApiException) as refused:
        _patch(runtime, job_namespace, forged)
    assert refused.value.status in (403, 422)
    assert "only status.progress and status.checkpoint" in refused.value.body, refused.value.body
    status = _status(kube_api, job_namespace)
    assert (status["phase"], status["restarts"], len(status["attempts"])) == ("Running", 2, 1)


def test_the_runtime_still_reports_progress_and_checkpoints(runtime, kube_api, job_namespace):
    _wait_policy_active(runtime, job_namespace)
    _patch(runtime, job_namespace, {"progress": {"globalStep": 7, "lastUpdateTime": "yesterday"}})
    _patch(runtime, job_namespace, {"checkpoint": {"latestStep": 5, "latestPath": "/ck/5"}})
    status = _status(kube_api, job_namespace)
    assert status["progress"]["globalStep"] == 7 and status["checkpoint"]["latestStep"] == 5
    # A malformed heartbeat is harmless: the operator reads it as "not a timestamp".
    from datetime import UTC, datetime

    from kuberl_operator.state import JobState

    body = {"metadata": {"name": "mine", "namespace": job_namespace, "uid": "u"}, "status": status}
    state = JobState.read(body, datetime.now(UTC))
    assert state.status.progress is not None and state.status.progress.last_update_time is None


def test_ray_pods_pass_pod_security_restricted(kube_api: Any, job_namespace: str) -> None:
    """Every Ray pod template, submitted (server-side dry run) to a namespace enforcing the
    `restricted` Pod Security Standard: admitted, with no warning."""
    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    labels = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/warn": "restricted"}  # fmt: skip
    core.patch_namespace(job_namespace, {"metadata": {"labels": labels}})
    spec = with_changes(valid_manifest(), {"metadata.name": "psa"})["spec"]
    from kuberl_api.job import RLTrainingJobSpec

    cluster = build_raycluster(
        JobRef("psa", job_namespace, "u"), RLTrainingJobSpec.model_validate(spec), 1, "img:1"
    )
    templates = [cluster["spec"]["headGroupSpec"]["template"]] + [
        group["template"] for group in cluster["spec"]["workerGroupSpecs"]
    ]
    core.create_namespaced_service_account(job_namespace, {"metadata": {"name": "psa-runtime"}})
    for index, template in enumerate(templates):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"psa-{index}",
               "labels": template["metadata"]["labels"]}, "spec": template["spec"]}  # fmt: skip
        _, code, headers = core.create_namespaced_pod_with_http_info(
            job_namespace, pod, dry_run="All"
        )  # refused (403) if it violated the enforced standard
        assert code == 201
        warning = headers.get("Warning", "")
        assert "would violate" not in warning, warning
