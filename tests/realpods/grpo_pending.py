"""GRPO on real pods: the operator creates a hostNetwork RayCluster from the CPU runtime image on
the real node, KubeRay starts Ray in a head pod and a worker pod, the ranks train inside the
worker pod, progress reaches status through the job's own ServiceAccount token, and the job ends
Succeeded with checkpoints and the exported model on a host-backed PersistentVolume. A worker pod
deleted mid-run (a real Ray node loss) fails the attempt; attempt 2 resumes from the checkpoint
and ends with the same weights as the uninterrupted run.

NOT COLLECTED YET (the name does not match test_*.py), because it does not pass here: on the
loopback real node (node IP 127.0.0.1) a Ray worker either refuses to join
(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0) or binds the host's routed IP, so KubeRay's probe on the pod
IP 127.0.0.1 never succeeds; and under this machine's load (load average 12 on 2 cores) the head
often misses Ray's fixed 30 s raylet start-up wait. Next step: give the real node a non-loopback
address (kubelet --hostname-override with it, kubelet bound there), then rename to test_grpo.py.
Run by hand: `KUBERL_CLUSTER_DIR=... pytest tests/realpods/grpo_pending.py`."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from realpods.grpo import host_volume, operator, real_job, stage_inputs
from support.e2e_jobs import read_metrics
from support.rljobs import Jobs, wait_for

pytestmark = pytest.mark.realpods

STEPS, SAVE_FREQ = 6, 2
RUN_TIMEOUT = 1200
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
    for item in host_volume(f"{namespace}-inputs", namespace, inputs):
        kubectl("apply", "-f", "-", stdin=json.dumps(item))
    api_port = urlparse(local_cluster.server).port
    with operator(local_cluster.kubeconfig, namespace, work) as process:
        yield {"ns": namespace, "work": work, "inputs": inputs, "api_port": api_port,
               "jobs": Jobs(kube_api, namespace), "operator": process}  # fmt: skip
        # While the operator still runs: it removes its finalizer from each job it deletes.
        kubectl("delete", "rltrainingjobs", "--all", "-n", namespace, "--timeout=120s")
    kubectl("delete", "namespace", namespace, "--wait=false")
    kubectl("delete", "persistentvolumes", "-l", f"kuberl.test/namespace={namespace}")


def run_dir(env: dict[str, Any], kubectl: Any, name: str) -> Path:
    """af_output_dir on a PersistentVolume backed by a host directory, writable by the pods."""
    af = env["work"] / name
    af.mkdir()
    import os

    os.chown(af, 1000, 1000)
    for item in host_volume(f"{env['ns']}-{name}", env["ns"], af):
        kubectl("apply", "-f", "-", stdin=json.dumps(item))
    return af


def pods(kubectl: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    return json.loads(kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json"))[
        "items"
    ]


def ranks_in_worker(kubectl: Any, namespace: str, cluster: str) -> str | None:
    """The worker pod's name once a training rank (Ray actor RankProcess) runs inside it."""
    for pod in pods(kubectl, namespace, f"ray.io/cluster={cluster},ray.io/node-type=worker"):
        if pod["status"].get("phase") != "Running":
            continue
        name = pod["metadata"]["name"]
        listing = kubectl("exec", "-n", namespace, name, "--", "ps", "-eo", "args", check=False)
        if "RankProcess" in listing:
            return name
    return None


def wait_phase(env: dict[str, Any], name: str, phase: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        status = env["jobs"].status(name)
        assert status.get("phase") != "Failed", json.dumps(status)[-3000:]
        return status if status.get("phase") == phase else None

    return wait_for(f"{name} {phase}", reached, timeout=RUN_TIMEOUT, interval=2)


def read_weights(model_dir: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


@pytest.fixture(scope="module")
def straight(env, kubectl) -> dict[str, Any]:
    af = run_dir(env, kubectl, "straight")
    claims = (f"{env['ns']}-straight", f"{env['ns']}-inputs")
    job = real_job("straight", af, env["inputs"], claims, env["api_port"], STEPS, SAVE_FREQ)
    job["spec"]["runPolicy"]["cleanupPolicy"] = "KeepAll"  # the head's logs are read afterwards
    env["jobs"].apply(job)

    def rank_seen() -> str | None:
        status = env["jobs"].status("straight")
        assert status.get("phase") not in ("Failed", "Succeeded"), json.dumps(status)[-3000:]
        return ranks_in_worker(kubectl, env["ns"], "straight-a1")

    worker = wait_for(
        "a training rank inside the worker pod", rank_seen, timeout=RUN_TIMEOUT, interval=3
    )
    status = wait_phase(env, "straight", "Succeeded")
    [head] = pods(kubectl, env["ns"], "ray.io/cluster=straight-a1,ray.io/node-type=head")
    head_log = kubectl("logs", "-n", env["ns"], head["metadata"]["name"])
    kubectl("delete", "raycluster", "straight-a1", "-n", env["ns"], "--wait=false")
    return {"af": af, "status": status, "worker": worker, "head": head, "head_log": head_log}


def test_grpo_trains_in_real_pods_and_reports_through_the_pod_token(straight, env):
    af, status = straight["af"], straight["status"]
    assert straight["worker"].startswith("straight-a1-")
    progress = status["progress"]
    assert progress["globalStep"] == STEPS and "critic/score/mean" in progress["metrics"]
    [attempt] = status["attempts"]
    assert attempt["result"] == "Succeeded"
    assert (af / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip() == "6"
    assert (af / "huggingface" / "model.safetensors").exists()
    assert sorted(read_metrics(af)) == list(range(1, STEPS + 1))
    # The operator found the head as in production: its host IP and the allocated port.
    head = straight["head"]
    ports = status["rayCluster"]["rayPorts"]
    assert status["rayCluster"]["dashboardURL"] == (
        f"http://{head['status']['hostIP']}:{ports['dashboard-port']}"
    )
    assert head["spec"]["hostNetwork"] is True
    # `kubectl logs` of the head pod is Ray's own start-up: KubeRay ran `ray start --head`.
    assert "Ray runtime started" in straight["head_log"], straight["head_log"][-2000:]


def test_pods_run_as_non_root(straight):
    spec = straight["head"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 1000


def test_worker_pod_lost_mid_run_resumes_from_checkpoint_to_the_same_weights(
    straight, env, kubectl
):
    af = run_dir(env, kubectl, "bumpy")
    claims = (f"{env['ns']}-bumpy", f"{env['ns']}-inputs")
    env["jobs"].apply(
        real_job("bumpy", af, env["inputs"], claims, env["api_port"], STEPS, SAVE_FREQ)
    )
    wait_for(
        f"a checkpoint at step {SAVE_FREQ}",
        lambda: (
            (env["jobs"].status("bumpy").get("checkpoint") or {}).get("latestStep", 0) >= SAVE_FREQ
        ),
        timeout=RUN_TIMEOUT,
        interval=2,
    )
    # A real Ray node loss: the worker pod, and the ranks in it, are gone.
    workers = "ray.io/cluster=bumpy-a1,ray.io/node-type=worker"
    kubectl("delete", "pod", "-n", env["ns"], "-l", workers, "--grace-period=0", "--force")
    status = wait_phase(env, "bumpy", "Succeeded")

    first, second = status["attempts"]
    assert first["result"] == "Failed" and second["result"] == "Succeeded"
    assert second["rayCluster"] == "bumpy-a2"
    assert second["resumedFromStep"] >= SAVE_FREQ
    assert status["progress"]["globalStep"] == STEPS
    import torch

    reference = read_weights(straight["af"] / "huggingface")
    for name, tensor in read_weights(af / "huggingface").items():
        assert torch.equal(reference[name], tensor), name
