"""No silent waits, on the real API server with the operator process running (issue 29 item
4): an env name with '=', a memory of 4GB and an output directory over the pod's /tmp are
Validated=False naming the field; a three-job dependsOn cycle fails DependencyCycle naming the
path; a RayCluster the API server refuses (a ResourceQuota allowing none) fails the attempt with
the API server's own words; a good job is validated meanwhile.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.rljobs import Jobs, fake_job, no_rayclusters_quota, wait_for

pytestmark = pytest.mark.cluster


@pytest.fixture
def jobs(
    kube_api: Any, local_cluster: Any, job_namespace: str, dashboard: Any, tmp_path: Path
) -> Iterator[Jobs]:
    from support.fake_dashboard import operator_on

    log = tmp_path / "op.log"
    with operator_on(local_cluster.kubeconfig, job_namespace, dashboard, log) as process:
        yield Jobs(kube_api, job_namespace)
        assert process.poll() is None, "the operator is still running"


def condition(jobs: Jobs, name: str, type_: str, status: str = "True") -> dict[str, Any]:
    return wait_for(
        f"{name} {type_}={status}",
        lambda: (c := jobs.condition(name, type_)).get("status") == status and c,
        timeout=120,
    )


def test_refusals_and_cycles_end_with_a_reason(
    jobs: Jobs, kube_api: Any, job_namespace: str, tmp_path: Path
) -> None:
    bad = {name: fake_job(name, tmp_path, "fake-steps-1-1") for name in ("env", "mem", "tmp")}
    bad["env"]["spec"]["env"] = [{"name": "A=B", "value": "1"}]
    bad["mem"]["spec"]["workerPools"][0]["memory"] = "4GB"
    bad["tmp"]["spec"]["af_output_dir"] = "/tmp"
    bad["tmp"]["spec"]["storage"] = {"output": {"claimName": "out"}}
    for body in bad.values():
        jobs.apply(body)
    cycle = {"c1": "c2", "c2": "c3", "c3": "c1"}
    for name, dependency in cycle.items():
        body = fake_job(name, tmp_path, "fake-steps-1-1")
        body["spec"]["dependsOn"] = [{"name": dependency}]
        jobs.apply(body)
    no_rayclusters_quota(kube_api, job_namespace)
    jobs.apply(fake_job("good", tmp_path, "fake-steps-1-1", backoffLimit=0))

    assert condition(jobs, "good", "Validated")
    messages = {name: condition(jobs, name, "Validated", "False")["message"] for name in bad}
    assert "spec.env[0].name: is not a valid environment variable name" in messages["env"]
    assert "spec.workerPools[0].memory: is not a Kubernetes quantity" in messages["mem"]
    assert "spec.af_output_dir: would be mounted over the pod's own /tmp" in messages["tmp"]
    for name in cycle:
        failed = condition(jobs, name, "Failed")
        assert failed["reason"] == "DependencyCycle"
        assert " -> ".join([name, cycle[name], cycle[cycle[name]], name]) in failed["message"]

    failed = condition(jobs, "good", "Failed")
    attempt = jobs.status("good")["attempts"][0]
    assert attempt["reason"] == "QuotaExceeded", attempt
    assert "exceeded quota: no-rayclusters" in attempt["message"]
    assert "RayCluster good-a1 (HTTP 403)" in attempt["message"]
    assert jobs.rayclusters() == []
