"""The operator's Kubernetes calls, in one place (each covered by a rule in ``rbac.py``)."""

import logging
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kuberl_api.job import GROUP, PLURAL, VERSION
from kuberl_operator.names import LABEL_JOB

log = logging.getLogger(__name__)

_RAY = ("ray.io", "v1", "rayclusters")


class Kube:
    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.rbac = client.RbacAuthorizationV1Api(api_client)
        self.networking = client.NetworkingV1Api(api_client)

    # --- RLTrainingJob ---------------------------------------------------------------------

    def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return _none_if_missing(
            lambda: self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        )

    def patch_job_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, {"status": patch}
        )

    def delete_job(self, namespace: str, name: str) -> None:
        _none_if_missing(
            lambda: self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        )

    # --- RayCluster ------------------------------------------------------------------------

    def get_raycluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        return _none_if_missing(
            lambda: self.custom.get_namespaced_custom_object(*_RAY[:2], namespace, _RAY[2], name)
        )

    def list_rayclusters(self, namespace: str, job: str) -> list[dict[str, Any]]:
        found = self.custom.list_namespaced_custom_object(
            *_RAY[:2], namespace, _RAY[2], label_selector=f"{LABEL_JOB}={job}"
        )
        return found.get("items", [])

    def delete_raycluster(self, namespace: str, name: str) -> None:
        _none_if_missing(
            lambda: self.custom.delete_namespaced_custom_object(
                *_RAY[:2], namespace, _RAY[2], name, propagation_policy="Background"
            )
        )

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector).items
        return [self.api_client.sanitize_for_serialization(pod) for pod in pods]

    # --- creation, idempotent --------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> bool:
        """Create ``obj``; False when it already exists (a restarted operator's second try)."""
        namespace = obj["metadata"]["namespace"]
        kind = obj["kind"]
        creators = {
            "RayCluster": lambda: self.custom.create_namespaced_custom_object(
                *_RAY[:2], namespace, _RAY[2], obj
            ),
            "ServiceAccount": lambda: self.core.create_namespaced_service_account(namespace, obj),
            "Role": lambda: self.rbac.create_namespaced_role(namespace, obj),
            "RoleBinding": lambda: self.rbac.create_namespaced_role_binding(namespace, obj),
            "PodGroup": lambda: self.custom.create_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", namespace, "podgroups", obj
            ),
            "Secret": lambda: self.core.create_namespaced_secret(namespace, obj),
            "NetworkPolicy": lambda: self.networking.create_namespaced_network_policy(
                namespace, obj
            ),
        }
        try:
            created = creators[kind]()
        except ApiException as err:
            if err.status == 409:
                return False
            raise
        log.info("created %s %s/%s", kind, namespace, obj["metadata"]["name"])
        self._created(kind, created)
        return True

    def _created(self, kind: str, created: Any) -> None:
        """The API server's answer to a create (cached_kube.py holds RayClusters at once)."""


def _none_if_missing(call: Any) -> Any:
    try:
        return call()
    except ApiException as err:
        if err.status == 404:
            return None
        raise
