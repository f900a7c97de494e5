"""``Kube`` whose reads of RayClusters, pods and other jobs come from watch-kept memory.

A reconcile then costs a constant number of requests whatever the number of jobs: a GET of its
own job (always fresh: the operator acts on it), its writes, and nothing else. The attempt's
RayCluster and pods come from informers (``informer.py``) label-selected on ``kuberl.io/job``;
``spec.dependsOn`` (and the cycle search) reads other jobs from a third one. Until an informer
has listed once, its reads go to the API server as before, so a slow start is never wrong.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

from kubernetes import client

from kuberl_api.job import GROUP, PLURAL, VERSION
from kuberl_operator.informer import Informer, Lister, without_managed_fields
from kuberl_operator.kube import Kube
from kuberl_operator.names import LABEL_JOB

log = logging.getLogger(__name__)

LABEL_CLUSTER = "ray.io/cluster"
_POD_STATUS_KEYS = ("phase", "conditions", "containerStatuses", "initContainerStatuses", "hostIP")
_META_KEYS = ("name", "namespace", "uid", "resourceVersion", "labels", "deletionTimestamp")


def trim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """What cluster_health and the hostNetwork dashboard read of a pod (a pod's spec is most of
    its size and is never read)."""
    status = pod.get("status") or {}
    return {
        "metadata": {k: v for k, v in pod["metadata"].items() if k in _META_KEYS},
        "status": {k: status[k] for k in _POD_STATUS_KEYS if k in status},
    }


def trim_job(job: dict[str, Any]) -> dict[str, Any]:
    """What chaining.py reads of another job: its dependsOn, phase and message."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    return {
        "metadata": {k: v for k, v in job["metadata"].items() if k in _META_KEYS},
        "spec": {"dependsOn": spec.get("dependsOn") or []},
        "status": {k: status[k] for k in ("phase", "message") if k in status},
    }


class JobDirectory:
    """Other RLTrainingJobs, as chaining.py's JobReader, from the jobs informer (or a GET)."""

    def __init__(self, kube: CachedKube) -> None:
        self.kube = kube

    def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        informer = self.kube.informer("jobs", namespace)
        if informer is None:
            return self.kube.get_job(namespace, name)
        return informer.get(namespace, name)


class CachedKube(Kube):
    def __init__(self, api_client: client.ApiClient, namespaces: tuple[str, ...] = ()) -> None:
        super().__init__(api_client)
        self._informers: dict[tuple[str, str], Informer] = {}
        for namespace in namespaces or ("",):
            for what, lister, selector, index, trim in self._kinds(namespace):
                self._informers[(what, namespace)] = Informer(
                    f"{what}@{namespace or '*'}", lister, selector, index, trim
                )
        self.jobs = JobDirectory(self)

    def _kinds(self, ns: str) -> list[tuple[str, Lister, str, str, Any]]:
        custom, core = self.custom, self.core
        if ns:
            jobs = functools.partial(
                custom.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL
            )
            rcs = functools.partial(custom.list_namespaced_custom_object, "ray.io", "v1", ns)
            pods = functools.partial(core.list_namespaced_pod, ns)
        else:
            jobs = functools.partial(custom.list_cluster_custom_object, GROUP, VERSION, PLURAL)
            rcs = functools.partial(custom.list_cluster_custom_object, "ray.io", "v1")
            pods = core.list_pod_for_all_namespaces
        return [
            ("rayclusters", functools.partial(rcs, "rayclusters"), LABEL_JOB, LABEL_JOB,
             without_managed_fields),
            ("pods", pods, LABEL_JOB, LABEL_CLUSTER, trim_pod),
            ("jobs", jobs, "", LABEL_JOB, trim_job),
        ]  # fmt: skip

    def start(self, timeout: float = 60.0) -> list[str]:
        """Start every informer; wait up to ``timeout`` for their first lists. Returns the ones
        not listed yet (their reads go to the API server until they are)."""
        for informer in self._informers.values():
            informer.start()
        deadline = time.monotonic() + timeout
        for informer in self._informers.values():
            informer.synced.wait(max(0.0, deadline - time.monotonic()))
        return [i.what for i in self._informers.values() if not i.synced.is_set()]

    def stop(self) -> None:
        for informer in self._informers.values():
            informer.stop()

    def informer(self, what: str, namespace: str) -> Informer | None:
        """The synced informer holding ``what`` of ``namespace``, else None."""
        found = self._informers.get((what, namespace)) or self._informers.get((what, ""))
        return found if found is not None and found.synced.is_set() else None

    # --- reads from memory -----------------------------------------------------------------

    def get_raycluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        informer = self.informer("rayclusters", namespace)
        if informer is None:
            return super().get_raycluster(namespace, name)
        return informer.get(namespace, name)

    def list_rayclusters(self, namespace: str, job: str) -> list[dict[str, Any]]:
        informer = self.informer("rayclusters", namespace)
        if informer is None:
            return super().list_rayclusters(namespace, job)
        return informer.by_label(namespace, job)

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        wanted = dict(term.split("=", 1) for term in selector.split(",") if "=" in term)
        informer = self.informer("pods", namespace)
        if informer is None or LABEL_CLUSTER not in wanted or selector.count("=") != len(wanted):
            return super().list_pods(namespace, selector)
        return [
            pod
            for pod in informer.by_label(namespace, wanted[LABEL_CLUSTER])
            if all((pod["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
        ]

    # --- the operator's own writes, held at once -------------------------------------------

    def delete_raycluster(self, namespace: str, name: str) -> None:
        super().delete_raycluster(namespace, name)
        if informer := self.informer("rayclusters", namespace):
            informer.drop(namespace, name)

    def _created(self, kind: str, created: Any) -> None:
        if kind != "RayCluster" or not isinstance(created, dict):
            return
        if informer := self.informer("rayclusters", created["metadata"]["namespace"]):
            informer.put(created)
