"""The whole path with real training: apply → RayCluster (KubeRay + kwok) → Ray job on the local
head → `kuberl train` (tiny GRPO on CPU) → progress in status → Succeeded, and a Ray job stopped
mid-training that resumes from its last checkpoint and ends exactly where the uninterrupted run did.

The backend_config is examples/demo.yaml, shrunk to under a second a step on an idle core, with
the trainer tests' digit reward so that the policy really moves (the arithmetic reward of a random
tiny model is all zeros, and zero advantages would leave the weights untouched).
"""

import json
import re
from pathlib import Path
from typing import Any

import pytest

from support.e2e_jobs import demo_job, read_metrics
from support.rljobs import Jobs, wait_for

pytestmark = pytest.mark.e2e

TOTAL_STEPS, SAVE_FREQ = 12, 3
RUN_TIMEOUT = 360


def watch_until(jobs: Jobs, name: str, phase: str, seen: dict[str, list]) -> dict:
    """Watch status until `phase`, recording every phase, step and RayCluster seen on the way.

    A watch (not polling) so that a fast run's intermediate progress is never missed.
    """
    for status in jobs.watch_status(name, timeout=RUN_TIMEOUT):
        if status.get("phase") and status["phase"] not in seen["phases"]:
            seen["phases"].append(status["phase"])
        step = (status.get("progress") or {}).get("globalStep")
        if step is not None and (not seen["steps"] or seen["steps"][-1] != step):
            seen["steps"].append(step)
        for raycluster in jobs.rayclusters():
            if raycluster["metadata"]["name"] not in {r["metadata"]["name"] for r in seen["rcs"]}:
                seen["rcs"].append(raycluster)
        assert status.get("phase") != "Failed", json.dumps(status)[-3000:]
        if status.get("phase") == phase:
            return status
    raise AssertionError(f"{name} did not reach {phase} within {RUN_TIMEOUT}s; saw {seen}")


def read_weights(model_dir: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


@pytest.fixture(scope="module")
def uninterrupted(module_jobs: Jobs, tiny_model: Path, tmp_path_factory: Any) -> dict[str, Any]:
    af = tmp_path_factory.mktemp("af") / "uninterrupted"
    module_jobs.apply(demo_job("straight", af, tiny_model, TOTAL_STEPS, SAVE_FREQ))
    seen: dict[str, list] = {"phases": [], "steps": [], "rcs": []}
    status = watch_until(module_jobs, "straight", "Succeeded", seen)
    return {"af": af, "status": status, "seen": seen}


def test_training_job_succeeds_with_checkpoints_and_exported_model(
    uninterrupted, module_jobs, ray_head, module_operator
):
    af, status, seen = uninterrupted["af"], uninterrupted["status"], uninterrupted["seen"]
    [raycluster] = seen["rcs"]
    assert raycluster["metadata"]["name"] == "straight-a1"
    [group] = raycluster["spec"]["workerGroupSpecs"]
    assert group["groupName"] == "cpu" and group["replicas"] == 1
    # Provisioning can pass between two polls when kwok readies the pods at once.
    assert seen["phases"][-2:] == ["Running", "Succeeded"]
    # Progress moved through the run, not only at its end (the reporter writes at most every 2s,
    # and a step takes well under that on an idle core, so the middle is seen only sparsely).
    assert any(0 < s < TOTAL_STEPS for s in seen["steps"]), seen["steps"]
    assert seen["steps"] == sorted(seen["steps"]), seen["steps"]
    progress = status["progress"]
    assert progress["globalStep"] == TOTAL_STEPS and progress["totalSteps"] == TOTAL_STEPS
    assert "critic/score/mean" in progress["metrics"]
    assert status["checkpoint"]["latestStep"] == TOTAL_STEPS
    [attempt] = status["attempts"]
    assert attempt["result"] == "Succeeded" and attempt.get("resumedFromStep") is None
    checkpoints = af / "checkpoints"
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip() == "12"
    assert sorted(p.name for p in checkpoints.glob("global_step_*")) == [
        "global_step_12",
        "global_step_9",
    ]  # max_actor_ckpt_to_keep: 2
    assert (af / "huggingface" / "model.safetensors").exists()
    assert sorted(read_metrics(af)) == list(range(1, TOTAL_STEPS + 1))
    log = ray_head["client"].logs_tail("straight-1", max_chars=200_000)
    assert "exported the trained model" in log and "resuming from" not in log
    wait_for("RayCluster deleted", lambda: module_jobs.rayclusters() == [], timeout=60)
    _, operator = module_operator
    assert 'kuberl_job_global_step{name="straight"' in operator.get("/metrics")


def test_ray_job_stopped_mid_training_resumes_from_checkpoint(
    uninterrupted, module_jobs, ray_head, tiny_model, tmp_path
):
    af = tmp_path / "interrupted"
    module_jobs.apply(demo_job("bumpy", af, tiny_model, TOTAL_STEPS, SAVE_FREQ))
    wait_for(
        f"a checkpoint at step {SAVE_FREQ}",
        lambda: (
            (module_jobs.status("bumpy").get("checkpoint") or {}).get("latestStep", 0) >= SAVE_FREQ
        ),
        timeout=RUN_TIMEOUT,
    )
    assert ray_head["client"].stop("bumpy-1")
    seen: dict[str, list] = {"phases": [], "steps": [], "rcs": []}
    restarting = watch_until(module_jobs, "bumpy", "Restarting", seen)
    assert restarting["attempts"][0]["reason"] == "RayJobStopped"
    status = watch_until(module_jobs, "bumpy", "Succeeded", seen)

    first, second = status["attempts"]
    resumed = second["resumedFromStep"]
    # The stopped driver has its ranks save at the step in flight (trainer/preemption.py), so
    # the resume step is the last step reached, not only a multiple of save_freq.
    assert resumed >= SAVE_FREQ
    assert first["result"] == "Failed" and second["result"] == "Succeeded"
    assert status["restarts"] == 1 and second["rayCluster"] == "bumpy-a2"
    log = ray_head["client"].logs_tail("bumpy-2", max_chars=200_000)
    # status records the newest checkpoint the runtime had *reported*; the runtime may have
    # saved a newer one in the instant before it was stopped, and resumes from the newest on disk.
    found = re.search(r"resuming from (\S+/global_step_(\d+))", log)
    assert found, log[-3000:]
    actual = int(found.group(2))
    assert found.group(1) == str(af / "checkpoints" / f"global_step_{actual}")
    assert actual >= resumed
    assert status["progress"]["globalStep"] == TOTAL_STEPS

    # The trainer resumes exactly: the same numbers and the same final model as without the stop.
    expected, got = read_metrics(uninterrupted["af"]), read_metrics(af)
    assert sorted(got) == list(range(1, TOTAL_STEPS + 1))
    for step, metrics in expected.items():
        assert got[step] == metrics, f"step {step}"
    import torch

    reference = read_weights(uninterrupted["af"] / "huggingface")
    for name, tensor in read_weights(af / "huggingface").items():
        assert torch.equal(reference[name], tensor), name
