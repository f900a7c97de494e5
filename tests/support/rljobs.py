"""RLTrainingJobs through the real API server, as a test (or the demo) sees them."""

import json
import time
from typing import Any

GROUP, VERSION, PLURAL = "kuberl.io", "v1alpha1", "rltrainingjobs"


def wait_for(what: str, predicate: Any, timeout: float = 60, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Jobs:
    def __init__(self, kube_api: Any, namespace: str) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(kube_api)
        self.namespace = namespace

    def apply(self, body: dict) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, body)

    def get(self, name: str) -> dict | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, name
            )
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def status(self, name: str) -> dict:
        return (self.get(name) or {}).get("status") or {}

    def condition(self, name: str, type_: str) -> dict:
        conditions = self.status(name).get("conditions", [])
        return next((c for c in conditions if c["type"] == type_), {})

    def patch_spec(self, name: str, spec: dict) -> None:
        self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, name, {"spec": spec}
        )

    def delete(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, name)

    def wait_phase(self, name: str, phase: str, timeout: float = 90) -> dict:
        try:
            return wait_for(
                f"{name} phase {phase}",
                lambda: (s := self.status(name)).get("phase") == phase and s,
                timeout=timeout,
            )
        except AssertionError as err:
            raise AssertionError(f"{err}; status: {json.dumps(self.status(name))}") from None

    def rayclusters(self) -> list[dict]:
        found = self.custom.list_namespaced_custom_object(
            "ray.io", "v1", self.namespace, "rayclusters"
        )
        return found["items"]
