"""RLTrainingJobs through the real API server, as a test (or the demo) sees them."""

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

from support.manifests import valid_manifest, with_changes

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

    def watch_status(self, name: str, timeout: float) -> Any:
        """Every status the job passes through from now on (a watch misses no update)."""
        from kubernetes import watch

        stream = watch.Watch().stream(
            self.custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            PLURAL,
            field_selector=f"metadata.name={name}",
            timeout_seconds=int(timeout),
        )
        for event in stream:
            yield event["object"].get("status") or {}

    def rayclusters(self) -> list[dict]:
        found = self.custom.list_namespaced_custom_object(
            "ray.io", "v1", self.namespace, "rayclusters"
        )
        return found["items"]


def fake_job(name: str, af_output_dir: Path, experiment: str, **run_policy: Any) -> dict:
    """A job run by the fake `kuberl` (tests/operator/fake_kuberl.py), as `experiment` says."""
    return with_changes(
        valid_manifest(),
        {
            "metadata.name": name,
            "spec.af_output_dir": str(af_output_dir),
            "spec.workerPools": [{"name": "cpu", "nodes": 1, "cpu": "2", "memory": "4Gi"}],
            "spec.backend_config.actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
            "spec.backend_config.trainer": {"experiment_name": experiment, "save_freq": 1},
            "spec.runPolicy": {"backoffLimit": 2, **run_policy},
        },
    )


def ray_submissions(ray_head: dict, uid: str) -> list[dict]:
    request = urllib.request.Request(ray_head["url"] + "/api/jobs/")
    request.add_header("x-ray-authorization", f"Bearer {ray_head['client'].token}")
    with urllib.request.urlopen(request, timeout=5) as response:
        listed = json.loads(response.read())
    return [job for job in listed if job.get("metadata", {}).get("kuberl.io/uid") == uid]


def crd_established(kube_api: Any) -> bool:
    """Is the RLTrainingJob CRD served? (Polled: `kubectl wait` right after the apply sometimes
    fails at once, before the new CRD is discoverable.)"""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        crd = client.ApiextensionsV1Api(kube_api).read_custom_resource_definition(
            f"{PLURAL}.{GROUP}"
        )
    except ApiException:
        return False
    conditions = crd.status.conditions or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def no_rayclusters_quota(kube_api: Any, namespace: str, name: str = "no-rayclusters") -> None:
    """A ResourceQuota allowing no RayCluster, its usage filled in as the quota controller
    would (this control plane may run none)."""
    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    hard = {"count/rayclusters.ray.io": "0"}
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": name}, "spec": {"hard": hard}}
    )
    status = {"status": {"hard": hard, "used": {"count/rayclusters.ray.io": "0"}}}
    core.patch_namespaced_resource_quota_status(name, namespace, status)
