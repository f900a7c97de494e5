"""The operator as a process against the real control plane (KubeRay + kwok) and a local Ray head.

Jobs here run the fake `kuberl` (fake_kuberl.py) on the Ray head, so every lifecycle path —
success, restart with resume, suspend, delete, retry budget, deadline, operator restart — takes
seconds, not a training run. The operator runs with the token of the ServiceAccount that `helm
install` of charts/kuberl creates, so these tests also prove the chart grants enough.
"""

from types import SimpleNamespace

import pytest

from support.rljobs import GROUP, PLURAL, VERSION, fake_job, ray_submissions, wait_for

pytestmark = pytest.mark.cluster

_NONE = SimpleNamespace(status=None)  # a Ray job not submitted yet


def driver_log(ray_head: dict, submission_id: str) -> str:
    return ray_head["client"].logs_tail(submission_id, max_chars=100_000)


def test_invalid_spec_is_reported_and_nothing_is_created(jobs, tmp_path):
    body = fake_job("bad", tmp_path, "fake-fail")
    body["spec"]["workerPools"] = [
        {"name": "gpu", "nodes": 1, "accelerator": {"type": "nvidia.com/gpu", "perNode": 0}}
    ]
    body["spec"]["backend_config"]["data"]["train_batch_size"] = 7
    jobs.apply(body)
    jobs.wait_phase("bad", "Failed")
    validated = jobs.condition("bad", "Validated")
    assert validated["status"] == "False" and validated["reason"] == "InvalidSpec"
    assert "perNode" in validated["message"] and "problem(s)" in validated["message"]
    assert jobs.rayclusters() == []


def test_job_succeeds_reports_progress_and_cleans_up(jobs, ray_head, operator_process, tmp_path):
    jobs.apply(fake_job("ok", tmp_path, "fake-steps-3-1"))
    wait_for("RayCluster ok-a1", lambda: jobs.rayclusters())
    [raycluster] = jobs.rayclusters()
    [group] = raycluster["spec"]["workerGroupSpecs"]
    assert group["groupName"] == "cpu" and group["replicas"] == 1
    jobs.wait_phase("ok", "Running", timeout=120)
    status = jobs.wait_phase("ok", "Succeeded", timeout=90)
    assert status["progress"]["globalStep"] == 3
    assert status["checkpoint"]["latestStep"] == 3
    assert (tmp_path / "checkpoints").exists() or any(tmp_path.rglob("global_step_3"))
    assert status["attempts"][0]["result"] == "Succeeded"
    assert jobs.condition("ok", "ClusterReady")["reason"] == "ClusterDeleted"
    wait_for("RayCluster deleted", lambda: jobs.rayclusters() == [])
    metrics = operator_process.get("/metrics")
    assert 'controller_runtime_reconcile_total{controller="rltrainingjob",result="success"}' in (
        metrics
    )
    assert "kuberl_job_time_to_cluster_ready_seconds_count 1.0" in metrics


def test_stopped_ray_job_restarts_and_resumes_from_checkpoint(jobs, ray_head, tmp_path):
    jobs.apply(fake_job("resume", tmp_path, "fake-steps-6-1"))
    _wait_for_checkpoint(jobs, "resume", 2)
    ray_head["client"].stop("resume-1")
    restarting = jobs.wait_phase("resume", "Restarting", timeout=30)
    assert restarting["attempts"][0]["reason"] == "RayJobStopped"
    status = jobs.wait_phase("resume", "Succeeded", timeout=120)
    _, second = status["attempts"]
    assert second["resumedFromStep"] >= 2
    assert status["restarts"] == 1
    assert f"resumed from step {second['resumedFromStep']}" in driver_log(ray_head, "resume-2")


def _wait_for_checkpoint(jobs, name: str, step: int) -> int:
    """The latest checkpointed step once it reaches `step`: first the attempt must run (on a
    loaded machine getting there alone can take a minute), then its steps take seconds."""
    jobs.wait_phase(name, "Running", timeout=120)

    def latest() -> int:
        return (jobs.status(name).get("checkpoint") or {}).get("latestStep", 0)

    try:
        return wait_for(f"a checkpoint at step {step}", lambda: latest() >= step and latest())
    except AssertionError as err:
        raise AssertionError(f"{err}; status: {jobs.status(name)}") from None


def _stopping_clusters(jobs, name: str) -> tuple[int] | None:
    """While Suspended is `Stopping`, how many RayClusters the job has: listed before the
    condition is read, and the operator writes the next reason before it deletes any."""
    clusters = jobs.rayclusters()
    stopping = jobs.condition(name, "Suspended").get("reason") == "Stopping"
    return (len(clusters),) if stopping else None


def test_suspend_waits_for_the_save_then_deletes_the_cluster_and_resumes_from_it(
    jobs, ray_head, tmp_path
):
    # The fake saves the step in flight on SIGTERM, taking 3 s more (a real save's time).
    jobs.apply(fake_job("pause", tmp_path, "fake-graceful-15-1"))
    before = _wait_for_checkpoint(jobs, "pause", 1)
    jobs.patch_spec("pause", {"runPolicy": {"suspend": True}})
    assert wait_for("Suspended=Stopping", lambda: _stopping_clusters(jobs, "pause")) == (1,)
    done = wait_for(
        "Suspended: RayJobStopped",
        lambda: (c := jobs.condition("pause", "Suspended")).get("reason") == "RayJobStopped" and c,
    )
    saved = jobs.status("pause")["checkpoint"]["latestStep"]
    assert saved > before and f"step {saved}" in done["message"]  # the step in flight
    assert "(STOPPED)" in done["message"] and jobs.status("pause")["phase"] == "Suspended"
    wait_for("RayCluster deleted", lambda: jobs.rayclusters() == [])
    assert ray_head["client"].get("pause-1").status == "STOPPED"
    assert f"saving a checkpoint at step {saved}" in driver_log(ray_head, "pause-1")
    jobs.patch_spec("pause", {"runPolicy": {"suspend": False}})
    status = jobs.wait_phase("pause", "Succeeded", timeout=120)
    assert status["attempts"][1]["resumedFromStep"] == saved
    assert status["restarts"] == 0


def test_deleting_a_running_job_stops_it(jobs, ray_head, tmp_path):
    jobs.apply(fake_job("gone", tmp_path, "fake-steps-60-1"))
    jobs.wait_phase("gone", "Running", timeout=120)
    wait_for("Ray job running", lambda: ray_head["client"].get("gone-1").status == "RUNNING")
    jobs.delete("gone")
    wait_for("job deleted", lambda: jobs.get("gone") is None, timeout=30)
    wait_for("Ray job stopped", lambda: ray_head["client"].get("gone-1").status == "STOPPED")
    wait_for("RayCluster garbage-collected", lambda: jobs.rayclusters() == [], timeout=60)


def test_backoff_limit_exhausted(jobs, ray_head, tmp_path):
    jobs.apply(fake_job("flaky", tmp_path, "fake-fail", backoffLimit=1))
    status = jobs.wait_phase("flaky", "Failed", timeout=120)
    assert jobs.condition("flaky", "Failed")["reason"] == "RetryLimitExceeded"
    assert [a["reason"] for a in status["attempts"]] == ["AppFailed", "AppFailed"]
    assert "deliberate failure" in status["attempts"][0]["message"]
    assert status["restarts"] == 1


def test_active_deadline(jobs, ray_head, tmp_path):
    # Long enough to get the Ray job running on a loaded machine, short enough to run out mid-run.
    jobs.apply(fake_job("late", tmp_path, "fake-steps-60-1", activeDeadlineSeconds=25))
    wait_for("Ray job running", lambda: (ray_head["client"].get("late-1") or _NONE).status
             == "RUNNING", timeout=25)  # fmt: skip
    status = jobs.wait_phase("late", "Failed", timeout=60)
    assert jobs.condition("late", "Failed")["reason"] == "DeadlineExceeded"
    assert status["attempts"][0]["reason"] == "DeadlineExceeded"
    wait_for("Ray job stopped", lambda: ray_head["client"].get("late-1").status == "STOPPED")


def test_operator_killed_and_restarted_mid_run(jobs, ray_head, operator_process, tmp_path):
    jobs.apply(fake_job("phoenix", tmp_path, "fake-steps-4-1"))
    wait_for("RayCluster", lambda: jobs.rayclusters(), timeout=30)
    operator_process.kill()  # maybe before, maybe after the submission: neither may duplicate
    operator_process.start()
    jobs.wait_phase("phoenix", "Running", timeout=120)
    operator_process.kill()
    operator_process.start()
    status = jobs.wait_phase("phoenix", "Succeeded", timeout=120)
    uid = jobs.get("phoenix")["metadata"]["uid"]
    assert [job["submission_id"] for job in ray_submissions(ray_head, uid)] == ["phoenix-1"]
    assert len(status["attempts"]) == 1


def test_runtime_account_patches_only_its_own_status(jobs, token_kubeconfig, tmp_path):
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    jobs.apply(fake_job("mine", tmp_path, "fake-steps-60-1", suspend=True))
    jobs.apply(fake_job("theirs", tmp_path / "b", "fake-steps-60-1", suspend=True))
    jobs.patch_spec("mine", {"runPolicy": {"suspend": False}})
    wait_for("runtime ServiceAccount", lambda: jobs.status("mine").get("attempts"), timeout=30)
    path = token_kubeconfig(jobs.namespace, "mine-runtime")
    runtime = client.CustomObjectsApi(config.new_client_from_config(config_file=str(path)))
    patch = {"status": {"progress": {"globalStep": 7}}}
    runtime.patch_namespaced_custom_object_status(GROUP, VERSION, jobs.namespace, PLURAL, "mine",
                                                  patch)  # fmt: skip
    assert jobs.status("mine")["progress"]["globalStep"] == 7
    with pytest.raises(ApiException) as denied:
        runtime.patch_namespaced_custom_object_status(
            GROUP, VERSION, jobs.namespace, PLURAL, "theirs", patch
        )
    assert denied.value.status == 403
    with pytest.raises(ApiException) as denied:
        runtime.patch_namespaced_custom_object(GROUP, VERSION, jobs.namespace, PLURAL, "mine",
                                               {"spec": {"image": "x"}})  # fmt: skip
    assert denied.value.status == 403
