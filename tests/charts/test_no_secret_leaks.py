"""No secret value reaches a job's status, its events or the operator's logs.

The operator runs as a process authenticated with the chart's own ServiceAccount token, against a
job whose runtime environment references a credentials Secret and whose object-storage
credentials are a Secret named in `spec.storage.credentials.secretRef` (issue 30). The chart's
RBAC gives it no read access to Secrets at all, so the values can only reach the pods through the
kubelet (`secretKeyRef`, `envFrom`); this test checks every place the operator writes to. No Ray
head runs here (no KubeRay), so no driver or rank log exists to read: the RayCluster's pod
templates are what those processes' environments would be made from.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# The cluster tier's kubectl fixture, shared rather than rewritten.
from cluster.conftest import kubectl  # noqa: F401
from freeport import free_port

from support.crds import names_in, wait_established
from support.helm import CHART_DIR, chart_operator_kubeconfig, job_manifest

pytestmark = pytest.mark.cluster

Kubectl = Callable[..., str]
S3_SECRET = "s3-credentials"


@pytest.fixture
def setting(
    kubectl: Kubectl,  # noqa: F811
    local_cluster: Any,
    tmp_path: Path,
) -> Iterator[dict[str, str]]:
    """A job namespace holding a credentials Secret, watched by a namespaced install of the chart,
    and a kubeconfig carrying that install's ServiceAccount token."""
    jobs_ns = f"leak-jobs-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", jobs_ns)
    crd = CHART_DIR / "crds" / "rltrainingjobs.kuberl.io.yaml"
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    wait_established(kubectl, names_in(str(crd)))
    secret_value = f"hf_{uuid.uuid4().hex}"
    kubectl(
        "create",
        "secret",
        "generic",
        "hf-credentials",
        f"--namespace={jobs_ns}",
        f"--from-literal=token={secret_value}",
    )
    # Recognisable object-storage credentials: an access key id and a secret access key.
    s3_key_id, s3_secret = f"AKIAKUBERL{uuid.uuid4().hex[:10].upper()}", f"s3sk-{uuid.uuid4().hex}"
    kubectl(
        "create",
        "secret",
        "generic",
        S3_SECRET,
        f"--namespace={jobs_ns}",
        f"--from-literal=AWS_ACCESS_KEY_ID={s3_key_id}",
        f"--from-literal=AWS_SECRET_ACCESS_KEY={s3_secret}",
        "--from-literal=AWS_ENDPOINT_URL=http://127.0.0.1:9",
    )
    try:
        with chart_operator_kubeconfig(
            local_cluster.kubeconfig, tmp_path, watch_namespaces=[jobs_ns]
        ) as kubeconfig:
            yield {
                "namespace": jobs_ns,
                "kubeconfig": kubeconfig,
                "secret": secret_value,
                "s3_key_id": s3_key_id,
                "s3_secret": s3_secret,
            }
    finally:
        kubectl("delete", "namespace", jobs_ns, "--wait=false")


@pytest.fixture
def operator_log(
    setting: dict[str, str],
    kubectl: Kubectl,  # noqa: F811
    tmp_path: Path,
) -> Iterator[Path]:
    """`kuberl operator` as the chart runs it, but on this machine and with a debug log."""
    log_path = tmp_path / "operator.log"
    argv = [
        sys.executable,
        "-m",
        "kuberl_cli",
        "--verbose",
        "operator",
        f"--namespace={setting['namespace']}",
        "--poll-interval=1",
        # No Ray head answers here: the attempt stays in provisioning while the operator has
        # validated the job, created the runtime identity and the RayCluster, and reported it.
        f"--dashboard-url-override=http://127.0.0.1:{free_port()}",
        "--dashboard-grace-seconds=600",
        "--allow-secret-env",  # the admin setting that lets jobs reference Secrets (off by default)
        "--metrics-host=127.0.0.1",
        f"--metrics-port={free_port()}",
        f"--liveness=http://127.0.0.1:{free_port()}/healthz",
        # Out of the cluster the Lease would be looked for in `default`, where the chart grants
        # nothing; leader election has its own test (tests/operator/test_leader_election_cluster).
        "--leader-election-id=none",
    ]
    env = {**os.environ, "KUBECONFIG": setting["kubeconfig"]}
    with log_path.open("w") as log:
        process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield log_path
    finally:
        # Jobs go first, while the operator still runs to take its finalizer off them; otherwise
        # the namespace would stay Terminating.
        kubectl(
            "delete",
            "rltrainingjobs",
            "--all",
            f"--namespace={setting['namespace']}",
            "--timeout=120s",
        )
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()


def test_secret_values_stay_out_of_status_events_and_logs(
    setting: dict[str, str],
    operator_log: Path,
    kubectl: Kubectl,  # noqa: F811
) -> None:
    from testcluster.probes import wait_until

    namespace, secret = setting["namespace"], setting["secret"]
    manifest = job_manifest("with-secret", namespace)
    manifest["spec"]["env"] = [
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "hf-credentials", "key": "token"}},
        }
    ]
    manifest["spec"]["storage"] = {"credentials": {"secretRef": {"name": S3_SECRET}}}
    trainer = manifest["spec"]["backend_config"].setdefault("trainer", {})
    trainer["default_hdfs_dir"] = "s3://leak-bucket/run"  # a URL that needs the credentials
    kubectl("create", "-f", "-", stdin=json.dumps(manifest))

    def get(*args: str) -> dict[str, Any]:
        return json.loads(kubectl("get", *args, f"--namespace={namespace}", "-o=json"))

    def cluster_created() -> bool:
        return bool(get("rayclusters.ray.io")["items"])

    def reported() -> bool:
        status = get("rltrainingjob", "with-secret").get("status") or {}
        return status.get("phase") in ("Provisioning", "Running") and bool(status.get("attempts"))

    log_tail = lambda: operator_log.read_text(errors="replace")[-3000:]  # noqa: E731
    try:
        # kopf, watching named namespaces, first retries the cluster-wide CRD and namespace
        # watches a Role cannot grant (about a minute) before it handles jobs.
        wait_until("the RayCluster of the job", cluster_created, None, timeout=240, interval=1)
        wait_until("the job's attempt in its status", reported, None, timeout=120, interval=1)
    except Exception as error:
        raise AssertionError(f"{error}\noperator log:\n{log_tail()}") from error

    (raycluster,) = get("rayclusters.ray.io")["items"]
    containers = [raycluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]] + [
        group["template"]["spec"]["containers"][0]
        for group in raycluster["spec"]["workerGroupSpecs"]
    ]
    for container in containers:
        (hf_token,) = (e for e in container["env"] if e["name"] == "HF_TOKEN")
        assert hf_token == {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "hf-credentials", "key": "token"}},
        }
        assert not any(e["name"].startswith("AWS_") for e in container["env"]), container["env"]
    # The storage Secret reaches the ranks' containers by reference only, the head's not at all
    # (its driver's environment is what Ray may print).
    head, *workers = containers
    assert "envFrom" not in head and S3_SECRET not in json.dumps(head), head
    assert workers
    for worker in workers:
        assert worker["envFrom"] == [{"secretRef": {"name": S3_SECRET}}]

    written = {
        "job (status included)": json.dumps(get("rltrainingjob", "with-secret")),
        "events": json.dumps(get("events")),
        "RayCluster": json.dumps(raycluster),
        "operator log": operator_log.read_text(errors="replace"),
    }
    assert written["events"].count('"kind": "Event"') >= 1, "the operator posted no event"
    values = {
        "HF token": secret,
        "S3 access key id": setting["s3_key_id"],
        "S3 secret access key": setting["s3_secret"],
    }
    for where, text in written.items():
        for what, value in values.items():
            assert value not in text, f"the {what}'s value appears in the {where}"
    # The chart lets the operator create Secrets (each head's token) but never read one.
    # A request line (verb, whitespace, an API path), not any JSON body that mentions a pod's
    # /var/run/secrets mount (the debug log holds the pod lists the operator reads).
    request = r"\b(?:GET|LIST|WATCH)\s+\S*?/api/v1/(?:namespaces/[^/\s\"]+/)?secrets\b"
    reads = re.findall(request, written["operator log"], re.I)
    assert not reads, log_tail()
