"""A Ray token key rotation on the real control plane: the operator restarts with a new key (a helm
upgrade that rotates it keeps the old one as a previous key); the job running across it is still
answered by its head, and a job created after it gets a Secret and a token of the new key.

The heads are a fake Jobs API that accepts exactly the tokens KubeRay would hand each head: the
one in the Secret its RayCluster's ``authOptions.secretName`` names (read here as KubeRay does).
"""

import base64
import secrets
from pathlib import Path
from typing import Any

import pytest

from support.fake_dashboard import FakeDashboard, operator_on
from support.rljobs import Jobs, fake_job, wait_for

pytestmark = pytest.mark.cluster


def _key(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    path.write_text(secrets.token_hex(32))
    return str(path)


def _head_token(kube_api: Any, jobs: Jobs, job: str, dashboard: FakeDashboard) -> str:
    """Play KubeRay: the token of the job's RayCluster, from the Secret it names; the fake head
    accepts it from now on. Returns the Secret's name."""
    from kubernetes import client

    def secret_name() -> str | None:
        for cluster in jobs.rayclusters():
            if cluster["metadata"]["labels"]["kuberl.io/job"] == job:
                return cluster["spec"]["authOptions"]["secretName"]
        return None

    name = wait_for(f"RayCluster of {job}", secret_name)
    secret = client.CoreV1Api(kube_api).read_namespaced_secret(name, jobs.namespace)
    token = base64.b64decode(secret.data["auth_token"]).decode()
    assert dashboard.tokens is not None
    with dashboard.lock:
        dashboard.tokens.add(token)
    return name


def _answered(dashboard: FakeDashboard, since: int, path: str) -> list[tuple[str, int]]:
    with dashboard.lock:
        return [(token, code) for _, p, token, code in dashboard.seen[since:] if p == path]


def test_a_key_rotation_keeps_running_jobs_and_new_jobs_use_the_new_key(
    kube_api, local_cluster, job_namespace, dashboard, tmp_path
):
    jobs = Jobs(kube_api, job_namespace)
    dashboard.tokens = set()
    old, new = _key(tmp_path, "old"), _key(tmp_path, "new")
    kubeconfig, log = local_cluster.kubeconfig, tmp_path / "operator.log"
    with operator_on(kubeconfig, job_namespace, dashboard, log, "--ray-token-key-file", old):
        jobs.apply(fake_job("before", tmp_path / "before", "fake-steps-1-1"))
        old_secret = _head_token(kube_api, jobs, "before", dashboard)
        wait_for("before-1 submitted", lambda: "before-1" in dashboard.submissions, timeout=120)
    # The upgrade: a new key, the old one kept as a previous key (rayTokenKey.rotation).
    previous = tmp_path / "previous"
    previous.write_text(Path(old).read_text() + "\n")
    rotated = ("--ray-token-key-file", new, "--ray-token-previous-keys-file", str(previous))
    since = len(dashboard.seen)
    with operator_on(kubeconfig, job_namespace, dashboard, tmp_path / "rotated.log", *rotated):
        polls = wait_for(
            "a poll of before-1 after the rotation",
            lambda: _answered(dashboard, since, "/api/jobs/before-1"),
        )
        assert {code for _, code in polls} == {200}  # its head still takes the operator's token
        dashboard.finish("before-1")
        assert jobs.wait_phase("before", "Succeeded")["restarts"] == 0

        jobs.apply(fake_job("after", tmp_path / "after", "fake-steps-1-1"))
        new_secret = _head_token(kube_api, jobs, "after", dashboard)
        wait_for("after-1 submitted", lambda: "after-1" in dashboard.submissions, timeout=120)
        dashboard.finish("after-1")
        jobs.wait_phase("after", "Succeeded")
    assert old_secret.startswith("before-ray-token-") and new_secret.startswith("after-ray-token-")
    assert old_secret.rsplit("-", 1)[1] != new_secret.rsplit("-", 1)[1]  # the keys' ids
    refused = [entry for entry in dashboard.seen[since:] if entry[3] == 401]
    assert refused == []  # no call after the rotation bore a token its head did not hold
