"""Leader election on the real API server (operator/kuberl_operator/leader.py): two operators
started together on one namespace, with exactly the chart's RBAC; one acts and the other
stands by; killing the first hands the jobs over; a clean stop releases the Lease at once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.helm import chart_operator_kubeconfig
from support.rljobs import Jobs, fake_job, wait_for
from tests.operator.conftest import OperatorProcess, _alive

pytestmark = pytest.mark.cluster

LEASE = "kuberl-operator"


@pytest.fixture
def release(local_cluster: Any, kuberl_crd: None, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A chart release of its own: (its namespace, a kubeconfig as its ServiceAccount)."""
    namespace = f"kuberl-le-{uuid.uuid4().hex[:6]}"
    home = tmp_path / "helm"
    home.mkdir()
    with chart_operator_kubeconfig(local_cluster.kubeconfig, home,
                                   namespace=namespace) as kubeconfig:  # fmt: skip
        yield namespace, kubeconfig


def holder(kube_api: Any, namespace: str) -> str | None:
    from kubernetes import client

    lease = client.CoordinationV1Api(kube_api).read_namespaced_lease(LEASE, namespace)
    return lease.spec.holder_identity


def acted_on(jobs: Jobs, name: str) -> bool:
    """The operator reconciled the job (only an operator writes status.phase)."""
    return bool(jobs.status(name).get("phase"))


def test_one_operator_acts_the_other_stands_by_and_takes_over(
    kube_api, local_cluster, job_namespace, release, dashboard, tmp_path
):
    lease_namespace, kubeconfig = release
    token = tmp_path / "token"
    token.write_text("unused")
    lease_args = ("--leader-election-namespace", lease_namespace)

    def operator(name: str) -> OperatorProcess:
        return OperatorProcess(kubeconfig, job_namespace, dashboard.url,
                               local_cluster.kubeconfig, tmp_path / f"{name}.log", str(token),
                               leader_election=lease_args)  # fmt: skip

    first, second = operator("first"), operator("second")
    first.start()
    second.start()
    try:
        for process in (first, second):
            wait_for("liveness of both operators", lambda p=process: _alive(p), timeout=60)
        wait_for("one operator leading", lambda: "leading: holds Lease" in first.output()
                 + second.output(), timeout=60)  # fmt: skip
        leader, standby = (first, second) if "leading:" in first.output() else (second, first)
        who = holder(kube_api, lease_namespace)
        assert who and f"as {who}" in leader.output()
        wait_for("the other standing by", lambda: f"is held by {who}" in standby.output())

        jobs = Jobs(kube_api, job_namespace)
        jobs.apply(fake_job("before", tmp_path, "fake-steps-1-1"))
        wait_for("the leader reconciles the job", lambda: acted_on(jobs, "before"), timeout=90)
        assert "leading:" not in standby.output()
        assert "before" not in standby.output()  # kopf names every object it handles

        leader.kill()  # no release: the standby waits out the Lease's duration on its own clock
        wait_for("the standby taking over", lambda: "leading: holds Lease" in standby.output(),
                 timeout=90)  # fmt: skip
        assert holder(kube_api, lease_namespace) != who
        jobs.apply(fake_job("after", tmp_path, "fake-steps-1-1"))
        wait_for("the new leader reconciles a new job", lambda: acted_on(jobs, "after"),
                 timeout=90)  # fmt: skip
        assert "after" in standby.output()

        assert standby.process is not None
        standby.process.terminate()  # a clean stop (SIGTERM) hands the Lease back
        wait_for("the Lease released", lambda: holder(kube_api, lease_namespace) is None)
        assert "released Lease" in standby.output()
    finally:
        for process in (first, second):
            process.stop()
        print("--- first ---\n" + first.output()[-5000:])
        print("--- second ---\n" + second.output()[-5000:])


def test_a_lease_the_operator_may_not_take_stops_it_naming_the_rbac(
    local_cluster, job_namespace, release, dashboard, tmp_path
):
    _, kubeconfig = release  # the chart grants Leases in its own namespace only
    token = tmp_path / "token"
    token.write_text("unused")
    elsewhere = ("--leader-election-namespace", "default")
    process = OperatorProcess(
        kubeconfig, job_namespace, dashboard.url, local_cluster.kubeconfig, tmp_path / "op.log",
        str(token), leader_election=elsewhere,
    )  # fmt: skip
    process.start()
    try:
        assert process.process is not None
        process.process.wait(timeout=120)  # no silent wait: it stops
        assert process.process.returncode != 0
        output = process.output()
        assert "Lease default/kuberl-operator is forbidden" in output, output[-3000:]
        assert "grant get/create/update on coordination.k8s.io leases" in output
        assert "leading:" not in output
    finally:
        process.stop()
