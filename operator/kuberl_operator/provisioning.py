"""Creating an attempt's RayCluster and what it needs; a refusal is the attempt's failure.

The API server refuses an object for reasons no retry cures: it is invalid (422), an admission
webhook or policy denies it (403/422), a quota is exhausted (403 "exceeded quota"). Each ends
the attempt ``Failed`` with the API server's own words as the message, instead of a reconcile
that raises and is retried forever. The same holds for pods KubeRay could not create (its
``ReplicaFailure`` condition, reasons ``FailedCreate*Pod``). A quota, a webhook that was not
reachable, and other server-side errors are ``infra`` (retried up to ``backoffLimit``, with
backoff); everything else is ``config`` (the job fails at once).
"""

import json
import logging
from typing import Any

from kubernetes.client.exceptions import ApiException

from kuberl_operator import conditions as cond
from kuberl_operator import kueue
from kuberl_operator.builders import build_raycluster, build_runtime_rbac
from kuberl_operator.builders.graceful_stop import stop_gracefully
from kuberl_operator.builders.network import build_network_policy, build_token_secret
from kuberl_operator.config import OperatorConfig
from kuberl_operator.failures import Failure, FailureClass
from kuberl_operator.gang import gang_objects, schedule_head_with_workers
from kuberl_operator.kube import Kube
from kuberl_operator.ray_auth import RayAuth
from kuberl_operator.redact import redact
from kuberl_operator.state import JobState

log = logging.getLogger(__name__)

REFUSED = "CreationRefused"
QUOTA = "QuotaExceeded"
POD_CREATION_FAILED = "PodCreationRefused"
_REFUSALS = (400, 403, 422)
_TRANSIENT_MARKERS = ("exceeded quota", "failed calling webhook", "timeout", "try again")
_KUBERAY_CREATE_REASONS = ("FailedCreateHeadPod", "FailedCreateWorkerPod")


def create_cluster(
    kube: Kube, config: OperatorConfig, ray_auth: RayAuth, state: JobState, cluster: str, index: int
) -> tuple[dict[str, Any], Failure | None]:
    """Create everything the attempt's RayCluster needs, then the cluster: the cluster as sent,
    and the refusal that stopped it, explained."""
    assert state.spec is not None
    namespace = state.ref.namespace
    for stale in kube.list_rayclusters(namespace, state.ref.name):
        if stale["metadata"]["name"] != cluster:
            kube.delete_raycluster(namespace, stale["metadata"]["name"])
    key = ray_auth.current_id
    body = build_raycluster(state.ref, state.spec, index, config.default_image, key)
    stop_gracefully(body, config.stop_grace_seconds)
    schedule_head_with_workers(body, state.spec)
    kueue.queue_raycluster(body, state.spec)
    objects = [
        *build_runtime_rbac(state.ref),
        build_token_secret(state.ref, ray_auth.secret_token(state.ref), key),
        build_network_policy(state.ref, config.operator_namespace),
        *gang_objects(body, state.spec, state.ref.owner_reference()),
        body,
    ]
    for obj in objects:
        try:
            kube.create(obj)
        except ApiException as err:
            if err.status not in _REFUSALS:
                raise  # the API server is unwell: a reconcile error, retried with backoff
            return body, refusal(obj, err)
    state.condition(cond.CLUSTER_READY, False, "PodsProvisioning", "RayCluster created")
    return body, None


def refusal(obj: dict[str, Any], err: ApiException) -> Failure:
    """The API server's refusal of ``obj`` as the attempt's failure, in its own words."""
    what = f"{obj['kind']} {obj['metadata']['name']}"
    message = redact(f"the API server refused {what} (HTTP {err.status}): {api_message(err)}")
    reason = QUOTA if "exceeded quota" in message else REFUSED
    return Failure(reason, message[:1000], _failure_class(message))


def api_message(err: ApiException) -> str:
    """The ``message`` of the API server's Status body, else its reason."""
    try:
        body = json.loads(err.body or "")
    except (TypeError, ValueError):
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return str(err.reason or "no reason given")


def pod_creation_failure(raycluster: dict[str, Any]) -> Failure | None:
    """KubeRay could not create the cluster's pods (its ReplicaFailure condition): why."""
    for condition in (raycluster.get("status") or {}).get("conditions") or []:
        failed = condition.get("type") == "ReplicaFailure" and condition.get("status") == "True"
        if failed and condition.get("reason") in _KUBERAY_CREATE_REASONS:
            text = f"{condition['reason']}: {condition.get('message', '')}".strip()
            message = redact(f"KubeRay could not create the pods: {text}")[:1000]
            return Failure(POD_CREATION_FAILED, message, _failure_class(message))
    return None


def _failure_class(message: str) -> FailureClass:
    lowered = message.lower()
    if any(marker in lowered for marker in _TRANSIENT_MARKERS):
        return FailureClass.INFRA
    return FailureClass.CONFIG
