"""One reconcile costs the same requests with 5 jobs or 50 (issue 29 item 8), on the real API
server: every request the operator's client sends is counted (a counting ApiClient).

The jobs form a dependsOn chain: the first runs (its RayCluster created, KubeRay's pods pending
on a node no pool has), each other one waits for the one before. Reading the chain used to cost
a GET per job walked (the cycle search) and each running job's reconcile LISTed its pods (the API
server scans the namespace for it); now both come from watch-kept memory (cached_kube.py), so a
reconcile is its own GET and its own status PATCH, whatever N.
"""

import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from kuberl_api.job import GROUP, PLURAL, VERSION
from kuberl_operator.cached_kube import CachedKube
from kuberl_operator.config import OperatorConfig
from kuberl_operator.kube import Kube
from kuberl_operator.reconcile import Reconciler
from support.manifests import with_changes
from support.rljobs import fake_job

from .conftest import wait_for

pytestmark = pytest.mark.cluster

NOWHERE = {"kuberl.io/bench": "no-such-node"}


def _counting_client(kube_api: Any) -> Any:
    from kubernetes import client

    class Counting(client.ApiClient):
        def __init__(self) -> None:
            super().__init__(configuration=kube_api.configuration)
            self.sent: list[tuple[str, str, str]] = []
            self.lock = threading.Lock()

        def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            query = dict(kwargs.get("query_params") or [])
            verb = "WATCH" if query.get("watch") else ("LIST" if _is_list(method, url) else method)
            with self.lock:
                self.sent.append((threading.current_thread().name, verb, urlsplit(url).path))
            return super().request(method, url, *args, **kwargs)

    return Counting()


def _is_list(method: str, url: str) -> bool:
    """A GET of a collection: its path ends in the plural (rayclusters, pods, rltrainingjobs)."""
    return method == "GET" and urlsplit(url).path.rstrip("/").split("/")[-1] in (
        "rayclusters",
        "pods",
        PLURAL,
    )


def _job(namespace: str, index: int) -> dict[str, Any]:
    body = fake_job(f"dep-{index}", Path(f"/tmp/kuberl-requests/dep-{index}"), "fake-steps-1-0")
    changes: dict[str, Any] = {
        "metadata.namespace": namespace,
        "spec.head": {"nodeSelector": NOWHERE},
    }
    if index:
        changes["spec.dependsOn"] = [{"name": f"dep-{index - 1}"}]
    body = with_changes(body, changes)
    body["spec"]["workerPools"][0]["nodeSelector"] = NOWHERE
    return body


def _reconcile(reconciler: Reconciler, counting: Any, namespace: str, name: str) -> list[tuple]:
    """The requests one reconcile of ``name`` sent (from this thread: not the informers')."""
    me = threading.current_thread().name
    with counting.lock:
        before = len(counting.sent)
    reconciler.reconcile(namespace, name)
    with counting.lock:
        return [(verb, path) for who, verb, path in counting.sent[before:] if who == me]


def test_a_reconcile_costs_the_same_requests_with_5_jobs_or_50(kube_api, job_namespace):
    from kubernetes import client

    custom = client.CustomObjectsApi(kube_api)
    counting = _counting_client(kube_api)
    kube = CachedKube(counting, (job_namespace,))
    assert kube.start(timeout=60) == []
    reconciler = Reconciler(kube, OperatorConfig(namespaces=(job_namespace,)), jobs=kube.jobs)
    direct = Kube(kube_api)
    seen: dict[int, dict[str, list[tuple]]] = {}
    try:
        created = 0
        for n in (5, 50):
            for index in range(created, n):
                custom.create_namespaced_custom_object(
                    GROUP, VERSION, job_namespace, PLURAL, _job(job_namespace, index)
                )
            created = n
            tail = f"dep-{n - 1}"
            wait_for(
                f"{tail} in the jobs informer", lambda t=tail: kube.jobs.get_job(job_namespace, t)
            )
            _reconcile(reconciler, counting, job_namespace, "dep-0")  # starts (N=5) or goes on
            # KubeRay's pods for dep-0's cluster reach the pods informer as they are.
            wait_for(
                "dep-0's pods in the informer, as the API server lists them",
                lambda: (
                    (cached := kube.list_pods(job_namespace, "ray.io/cluster=dep-0-a1"))
                    and sorted(p["metadata"]["name"] for p in cached)
                    == sorted(
                        p["metadata"]["name"]
                        for p in direct.list_pods(job_namespace, "ray.io/cluster=dep-0-a1")
                    )
                ),
            )
            seen[n] = {
                "running": _reconcile(reconciler, counting, job_namespace, "dep-0"),
                "waiting": _reconcile(reconciler, counting, job_namespace, tail),
            }
            status = custom.get_namespaced_custom_object(
                GROUP, VERSION, job_namespace, PLURAL, tail
            )["status"]
            assert status["phase"] == "Pending"
            assert f"waiting for RLTrainingJob dep-{n - 2} (phase" in status["message"]
    finally:
        kube.stop()
    job_path = f"/apis/{GROUP}/{VERSION}/namespaces/{job_namespace}/{PLURAL}"
    for n, requests in seen.items():
        for what, sent in requests.items():
            verbs = [verb for verb, _ in sent]
            assert "LIST" not in verbs and "WATCH" not in verbs, (n, what, sent)
            assert all(path.startswith(job_path) for _, path in sent), (n, what, sent)
            assert verbs.count("GET") == 1, (n, what, sent)  # its own job, nothing else
            assert len(sent) <= 2, (n, what, sent)  # and at most its status PATCH
    assert [v for v, _ in seen[5]["waiting"]] == [v for v, _ in seen[50]["waiting"]]
    # The informers listed once each and each keeps one watch: constant too.
    informers = [(verb, path) for who, verb, path in counting.sent if who.startswith("informer-")]
    assert sorted(verb for verb, _ in informers) == ["LIST"] * 3 + ["WATCH"] * 3, informers
