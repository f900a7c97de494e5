"""GRPO on real pods: the operator creates a hostNetwork RayCluster from the CPU runtime image on
the real node, KubeRay starts Ray in a head pod and a worker pod, the ranks train inside the
worker pod, progress reaches status through the job's own ServiceAccount token, and the job ends
Succeeded with checkpoints and the exported model on a host-backed PersistentVolume. A worker pod
deleted mid-run (a real Ray node loss) fails the attempt; attempt 2 resumes from the checkpoint
on a fresh RayCluster and ends with the same weights as the uninterrupted run.

Every wait polls a state (job status, pod phase, a process inside a pod) with a deadline; none
sleeps and hopes. The deadlines are generous because this tier runs on a shared 2-core machine."""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from realnode.jobs import RUNTIME_UID, host_volume
from realnode.ranks import find_rank

from realpods.grpo import hold_after_checkpoint, operator, real_job, release, stage_inputs
from support.e2e_jobs import read_metrics
from support.rljobs import Jobs, wait_for

# The module's two runs take minutes each under load; the default per-test limit is 900 s.
pytestmark = [pytest.mark.realpods, pytest.mark.timeout(3600)]

STEPS, SAVE_FREQ = 6, 2
RUN_TIMEOUT = 1500
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def env(real_node, local_cluster, kube_api, kubectl, tmp_path_factory) -> Any:
    from transformers import AutoTokenizer

    from kuberl_runtime.testing.tiny import save_tiny_model

    kubectl("apply", "--server-side", "--force-conflicts", "-f",
            str(REPO / "crds" / "rltrainingjobs.kuberl.io.yaml"))  # fmt: skip
    wait_for(
        "the CRD", lambda: "rltrainingjobs" in kubectl("api-resources", "--api-group=kuberl.io")
    )
    work = tmp_path_factory.mktemp("realgrpo")
    work.chmod(0o755)
    tokenizer = AutoTokenizer.from_pretrained(REPO / "examples" / "tokenizer" / "arith-tokenizer")
    model = work / "tiny-qwen2-src"
    save_tiny_model(model, tokenizer, seed=0)
    namespace = f"realgrpo-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace)
    wait_for("default SA", lambda: "default" in kubectl("get", "sa", "-n", namespace, "-o", "name"))
    inputs = work / "inputs"
    inputs.mkdir()
    stage_inputs(inputs, model)
    for item in host_volume(f"{namespace}-inputs", namespace, str(inputs)):
        kubectl("apply", "-f", "-", stdin=json.dumps(item))
    api_port = urlparse(local_cluster.server).port
    with operator(local_cluster.kubeconfig, namespace, work) as process:
        yield {
            "ns": namespace, "work": work, "inputs": inputs, "api_port": api_port,
            "jobs": Jobs(kube_api, namespace), "operator": process, "node": real_node,
        }  # fmt: skip
        # While the operator still runs: it removes its finalizer from each job it deletes.
        kubectl("delete", "rltrainingjobs", "--all", "-n", namespace, "--timeout=300s")
    kubectl("delete", "namespace", namespace, "--wait=false")
    kubectl("delete", "persistentvolumes", "-l", f"kuberl.test/namespace={namespace}")


def run_dir(env: dict[str, Any], kubectl: Any, name: str) -> Path:
    """af_output_dir on a PersistentVolume backed by a host directory, writable by the pods."""
    af = env["work"] / name
    af.mkdir()
    os.chown(af, RUNTIME_UID, RUNTIME_UID)
    for item in host_volume(f"{env['ns']}-{name}", env["ns"], str(af)):
        kubectl("apply", "-f", "-", stdin=json.dumps(item))
    return af


def pods(kubectl: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    listing = kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json")
    return json.loads(listing)["items"]


def wait_for_rank(env: dict[str, Any], kubectl: Any, job: str) -> dict[str, Any]:
    """The worker pod a training rank runs in, seen from inside that pod's PID namespace."""
    cluster = f"{job}-a1"

    def seen() -> dict[str, Any] | None:
        status = env["jobs"].status(job)
        assert status.get("phase") not in ("Failed", "Succeeded"), json.dumps(status)[-3000:]
        return find_rank(kubectl, env["ns"], cluster)

    return wait_for("a training rank inside a pod", seen, timeout=RUN_TIMEOUT, interval=3)


# Inside the worker pod while its rank trains: the image's files and HOME cannot be written, /tmp
# (an emptyDir holding Ray's session dir) can.
WRITE_PROBE = (
    "touch /opt/kuberl/probe 2>/dev/null && echo root=writable || echo root=read-only; "
    "touch /tmp/probe && echo tmp=writable; echo home=$HOME; ls -d /tmp/ray/session_latest"
)


def scrape(url: str, line: str) -> str | None:
    """The page at `url` once it holds `line`; None before."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            page = response.read().decode()
    except OSError:
        return None
    return page if line in page.splitlines() else None


def wait_phase(env: dict[str, Any], name: str, phase: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        status = env["jobs"].status(name)
        assert status.get("phase") != "Failed", json.dumps(status)[-3000:]
        return status if status.get("phase") == phase else None

    return wait_for(f"{name} {phase}", reached, timeout=RUN_TIMEOUT, interval=2)


def first_attempt_failed(env: dict[str, Any]) -> bool:
    attempts = env["jobs"].status("bumpy").get("attempts") or [{}]
    return attempts[0].get("result") == "Failed"


def read_weights(model_dir: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


@pytest.fixture(scope="module")
def straight(env, kubectl) -> dict[str, Any]:
    af = run_dir(env, kubectl, "straight")
    claims = (f"{env['ns']}-straight", f"{env['ns']}-inputs")
    job = real_job("straight", af, env["inputs"], claims, env["api_port"], STEPS, SAVE_FREQ)
    job["spec"]["runPolicy"]["cleanupPolicy"] = "KeepAll"  # the head's logs are read afterwards
    # Held after its first checkpoint until a rank was seen: a rank lives for seconds only.
    hold_after_checkpoint(env["inputs"], af)
    try:
        env["jobs"].apply(job)
        rank = wait_for_rank(env, kubectl, "straight")
        writes = kubectl("exec", "-n", env["ns"], rank["pod"]["metadata"]["name"], "--", "sh",
                         "-c", WRITE_PROBE, check=False)  # fmt: skip
        # Rank 0 serves its metrics on the node's address, on its pod group's own port.
        url = f"http://{env['node'].address}:{rank['env']['KUBERL_METRICS_PORT']}/metrics"
        checkpoint = f'kuberl_runtime_last_checkpoint_step{{kuberl_job="straight"}} {SAVE_FREQ}.0'
        scraped = wait_for(f"{url} at checkpoint {SAVE_FREQ}", lambda: scrape(url, checkpoint))
    finally:
        release(env["inputs"])
    status = wait_phase(env, "straight", "Succeeded")
    [head] = pods(kubectl, env["ns"], "ray.io/cluster=straight-a1,ray.io/node-type=head")
    head_log = kubectl("logs", "-n", env["ns"], head["metadata"]["name"])
    kubectl("delete", "raycluster", "straight-a1", "-n", env["ns"], "--wait=false")
    return {
        "af": af, "status": status, "rank": rank, "head": head, "head_log": head_log,
        "scraped": scraped, "writes": writes,
    }  # fmt: skip


def test_grpo_trains_in_real_pods_and_reports_through_the_pod_token(straight, env):
    af, status = straight["af"], straight["status"]
    progress = status["progress"]
    assert progress["globalStep"] == STEPS and "critic/score/mean" in progress["metrics"]
    [attempt] = status["attempts"]
    assert attempt["result"] == "Succeeded"
    assert (af / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip() == "6"
    assert (af / "huggingface" / "model.safetensors").exists()
    assert sorted(read_metrics(af)) == list(range(1, STEPS + 1))
    # The driver log of the attempt is persisted on the output volume.
    driver_log = (af / "logs" / "attempt-1" / "driver.log").read_text()
    assert "ray launcher: 1 ranks on 1 node(s)" in driver_log, driver_log[-2000:]
    # The operator found the head as in production: its host IP and the allocated port.
    head = straight["head"]
    assert head["spec"]["hostNetwork"] is True
    assert head["status"]["hostIP"] == env["node"].address
    ports = status["rayCluster"]["rayPorts"]
    assert status["rayCluster"]["dashboardURL"] == (
        f"http://{head['status']['hostIP']}:{ports['dashboard-port']}"
    )
    # `kubectl logs` of the head pod is Ray's own start-up: KubeRay ran `ray start --head`.
    assert "Ray runtime started" in straight["head_log"], straight["head_log"][-2000:]


def test_ranks_ran_inside_the_worker_pod_with_the_pod_env(straight, env):
    """Fails when the image's entrypoint/PATH (no Ray), the pod env or the placement are wrong:
    the rank is seen from inside the worker pod's own PID namespace, with the env the operator
    gave that pod's container (the head advertises no CPUs, so no rank may land there)."""
    rank = straight["rank"]
    assert rank["role"] == "worker", rank["pod"]["metadata"]["name"]
    assert rank["pod"]["metadata"]["name"].startswith("straight-a1-")
    assert rank["pod"]["status"]["hostIP"] == env["node"].address
    assert rank["env"]["KUBERL_JOB_NAME"] == "straight"
    assert rank["env"]["KUBERL_JOB_NAMESPACE"] == env["ns"]


def test_rank_metrics_port_is_the_worker_groups_own(straight):
    """hostNetwork: the runtime's metrics port comes from the RayCluster's port block (declared
    as the worker's `runtime-metrics` hostPort), never a fixed port two pods would share."""
    rank = straight["rank"]
    port = int(rank["env"]["KUBERL_METRICS_PORT"])
    [container] = rank["pod"]["spec"]["containers"]
    declared = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert declared["runtime-metrics"] == port
    head_ports = straight["status"]["rayCluster"]["rayPorts"]
    assert port != head_ports["runtime-metrics"] and port != 8090
    assert 'kuberl_runtime_global_step{kuberl_job="straight"}' in straight["scraped"]


def test_pods_run_as_non_root_with_a_read_only_root_filesystem(straight):
    """The job above trained this way: Ray and the runtime write only to /tmp and the volumes."""
    for pod in (straight["head"], straight["rank"]["pod"]):
        spec = pod["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] == 1000
        [container] = spec["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
    writes = straight["writes"]
    assert "root=read-only" in writes and "tmp=writable" in writes, writes
    assert "home=/tmp" in writes and "/tmp/ray/session_latest" in writes, writes


def test_worker_pod_lost_mid_run_resumes_from_checkpoint_to_the_same_weights(
    straight, env, kubectl
):
    af = run_dir(env, kubectl, "bumpy")
    claims = (f"{env['ns']}-bumpy", f"{env['ns']}-inputs")
    # The run waits in its reward function once checkpoint SAVE_FREQ is written: the worker pod
    # is lost mid-run on any machine, never after the run already finished.
    hold_after_checkpoint(env["inputs"], af)
    try:
        env["jobs"].apply(
            real_job("bumpy", af, env["inputs"], claims, env["api_port"], STEPS, SAVE_FREQ)
        )

        def checkpointed() -> int | None:
            status = env["jobs"].status("bumpy")
            assert status.get("phase") not in ("Failed", "Succeeded"), json.dumps(status)[-3000:]
            return (status.get("checkpoint") or {}).get("latestStep")

        step = wait_for("the first checkpoint", checkpointed, RUN_TIMEOUT, interval=1)
        assert step == SAVE_FREQ
        # A real Ray node loss: the worker pod, and the ranks in it, are gone. The run stays
        # held until the operator saw the attempt fail (a forced delete returns before the
        # kubelet killed the containers; released earlier, the rank would train on meanwhile).
        workers = "ray.io/cluster=bumpy-a1,ray.io/node-type=worker"
        kubectl("delete", "pod", "-n", env["ns"], "-l", workers, "--grace-period=0", "--force")
        wait_for("attempt 1 to fail", lambda: first_attempt_failed(env), RUN_TIMEOUT, interval=1)
    finally:
        release(env["inputs"])
    status = wait_phase(env, "bumpy", "Succeeded")

    first, second = status["attempts"]
    assert first["result"] == "Failed" and second["result"] == "Succeeded"
    assert first["lastStep"] == SAVE_FREQ
    assert second["rayCluster"] == "bumpy-a2"
    assert second["resumedFromStep"] == SAVE_FREQ
    assert status["progress"]["globalStep"] == STEPS
    assert sorted(p.name for p in (af / "logs").glob("attempt-*")) == ["attempt-1", "attempt-2"]
    import torch

    reference = read_weights(straight["af"] / "huggingface")
    resumed = read_weights(af / "huggingface")
    assert reference.keys() == resumed.keys()
    for name, tensor in resumed.items():
        assert torch.equal(reference[name], tensor), name
