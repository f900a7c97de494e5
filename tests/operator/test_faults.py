"""Faults a job survives, with the real operator, control plane and local Ray head.

A worker pod deleted mid-run, kube-apiserver restarted mid-run, a crash while a checkpoint is
being written. The operator killed mid-reconcile is test_cluster_lifecycle's
test_operator_killed_and_restarted_mid_run; the retry budget and the deadline are there too.
"""

from pathlib import Path

import pytest

from support.e2e_jobs import demo_job, read_metrics
from support.rljobs import fake_job, ray_submissions, wait_for

pytestmark = pytest.mark.cluster

_WORKERS = "ray.io/node-type=worker"


def worker_pods(kube_api, namespace: str) -> list:
    from kubernetes import client

    pods = client.CoreV1Api(kube_api).list_namespaced_pod(namespace, label_selector=_WORKERS)
    return [pod for pod in pods.items if pod.metadata.deletion_timestamp is None]


def readable(jobs, name: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        return jobs.get(name) is not None
    except ApiException:
        return False


def test_worker_pod_deleted_mid_run(jobs, kube_api, ray_head, tmp_path):
    from kubernetes import client

    jobs.apply(fake_job("podloss", tmp_path, "fake-steps-10-1"))
    jobs.wait_phase("podloss", "Running", timeout=120)
    [pod] = worker_pods(kube_api, jobs.namespace)
    client.CoreV1Api(kube_api).delete_namespaced_pod(
        pod.metadata.name, jobs.namespace, grace_period_seconds=0
    )
    # KubeRay replaces the pod; the attempt recovers (or fails and resumes), never the job.
    wait_for(
        "a replacement worker pod",
        lambda: [p for p in worker_pods(kube_api, jobs.namespace) if p.metadata.uid
                 != pod.metadata.uid],
        timeout=60,
    )  # fmt: skip
    status = jobs.wait_phase("podloss", "Succeeded", timeout=120)
    assert status["progress"]["globalStep"] == 10
    assert status["attempts"][-1]["result"] == "Succeeded"
    for later in status["attempts"][1:]:
        assert later["resumedFromStep"] >= 1


def test_apiserver_restarted_mid_run(jobs, local_cluster, operator_process, ray_head, tmp_path):
    jobs.apply(fake_job("outage", tmp_path, "fake-steps-20-1"))
    from localcluster import restart  # hack/ is on pytest's pythonpath

    jobs.wait_phase("outage", "Running", timeout=120)
    restart(Path(local_cluster.dir), "kube-apiserver")
    # /readyz may pass while custom resources' storage still answers 429 for a moment.
    wait_for("the job readable again", lambda: readable(jobs, "outage"), timeout=60)
    status = jobs.wait_phase("outage", "Succeeded", timeout=180)
    assert status["progress"]["globalStep"] == 20
    assert operator_process.process.poll() is None and operator_process.get("/healthz")
    uid = jobs.get("outage")["metadata"]["uid"]
    assert [job["submission_id"] for job in ray_submissions(ray_head, uid)] == ["outage-1"]
    assert len(status["attempts"]) == 1


@pytest.mark.e2e
def test_crash_during_checkpoint_write_resumes_from_previous(jobs, ray_head, tiny_model, tmp_path):
    af = tmp_path / "af"
    # fake_kuberl.py turns the experiment name into KUBERL_FAULT_POINT/STEP for attempt 1 only.
    job = demo_job("torn", af, tiny_model, 6, 2, experiment="fault-checkpoint_write-4")
    jobs.apply(job)
    # A watch, not polling: the files are looked at the moment attempt 1 is seen failed.
    statuses = jobs.watch_status("torn", timeout=360)
    restarting = next((s for s in statuses if s.get("phase") == "Restarting"), None)
    assert restarting is not None, f"torn never restarted: {jobs.status('torn')}"
    assert restarting["attempts"][0]["result"] == "Failed"
    checkpoints = af / "checkpoints"
    assert (checkpoints / ".tmp-global_step_4").is_dir()  # killed before the rename
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    # Everything but checkpoints (retention prunes those) must still be there at the end.
    kept = {p for p in af.rglob("*") if p.is_file() and checkpoints not in p.parents}

    status = jobs.wait_phase("torn", "Succeeded", timeout=360)
    first, second = status["attempts"]
    assert first["result"] == "Failed" and second["result"] == "Succeeded"
    assert second["resumedFromStep"] == 2
    log = ray_head["client"].logs_tail("torn-2", max_chars=200_000)
    assert f"resuming from {checkpoints / 'global_step_2'}" in log
    assert not [p for p in kept if not p.exists()]
    assert not list(checkpoints.glob(".tmp-*"))
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip() == "6"
    assert sorted(read_metrics(af)) == list(range(1, 7))
    assert (af / "huggingface" / "model.safetensors").exists()
