"""Chaining on the real control plane, with real training on the local Ray head.

An SFT job (verl's SFT config under spec.sft_config) fine-tunes the tiny Qwen2 and exports it; a
GRPO job naming it in spec.dependsOn, whose model.path is the SFT job's af_output_dir/huggingface,
waits visibly (Pending, WaitingForDependency) until the SFT job Succeeded, then trains from that
export. An SFT attempt killed in the middle of a step resumes from its newest checkpoint to the
very model the uninterrupted run exported. A failed dependency fails the job at once (there the
Ray side is the fake Jobs API, support/fake_dashboard.py: the test decides when a Ray job ends).
"""

import json
import re
from pathlib import Path
from typing import Any

import pytest

from support.e2e_jobs import demo_job, read_metrics, sft_job
from support.manifests import valid_sft_manifest, with_changes
from support.rljobs import Jobs, fake_job, wait_for

WAITING = "WaitingForDependency"
SFT_STEPS, SFT_SAVE_FREQ, GRPO_STEPS = 6, 2, 2
RUN_TIMEOUT = 600
CPU_POOL = [{"name": "cpu", "nodes": 1, "cpu": "2", "memory": "4Gi"}]


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), {})


def clusters_of(jobs: Jobs, name: str) -> list[str]:
    return [
        rc["metadata"]["name"]
        for rc in jobs.rayclusters()
        if rc["metadata"]["labels"].get("kuberl.io/job") == name
    ]


def watch_to_success(jobs: Jobs, name: str, record: Any = None) -> dict[str, Any]:
    """Every status `name` passes through until Succeeded (a watch misses no update)."""
    for status in jobs.watch_status(name, timeout=RUN_TIMEOUT):
        if record is not None:
            record(status)
        assert status.get("phase") != "Failed", json.dumps(status)[-4000:]
        if status.get("phase") == "Succeeded":
            return status
    raise AssertionError(f"{name} did not succeed within {RUN_TIMEOUT}s: {jobs.status(name)}")


def read_weights(model_dir: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory: Any) -> Path:
    from kuberl_runtime.testing.arith_sft import write_sum_datasets

    out = tmp_path_factory.mktemp("sft-data")
    return write_sum_datasets(out, sft_size=64, rl_size=8, test_size=8)["sft_train"]


@pytest.fixture(scope="module")
def chain(
    module_jobs: Jobs, tiny_model: Path, sft_data: Path, tmp_path_factory: Any
) -> dict[str, Any]:
    """GRPO applied first, naming an SFT job that does not exist yet; then the SFT job."""
    jobs, root = module_jobs, tmp_path_factory.mktemp("chain")
    sft_af, grpo_af = root / "sft-warm", root / "grpo-warm"
    grpo = demo_job("grpo-warm", grpo_af, sft_af / "huggingface", GRPO_STEPS, GRPO_STEPS)
    grpo["spec"]["dependsOn"] = [{"name": "sft-warm"}]
    jobs.apply(grpo)
    wait_for(
        "grpo-warm waiting for a job that does not exist yet",
        lambda: "(not found)" in condition(jobs.status("grpo-warm"), WAITING).get("message", ""),
        timeout=120,
    )
    jobs.apply(sft_job("sft-warm", sft_af, tiny_model, sft_data, SFT_STEPS, SFT_SAVE_FREQ))
    seen: list[dict[str, Any]] = []

    def record(status: dict[str, Any]) -> None:
        waiting = condition(status, WAITING)
        held = waiting.get("status") == "True"
        seen.append(
            {
                "phase": status.get("phase"),
                "attempts": len(status.get("attempts", [])),
                "waiting": waiting,
                "clusters": clusters_of(jobs, "grpo-warm") if held else [],
            }
        )

    grpo_status = watch_to_success(jobs, "grpo-warm", record)
    return {
        "sft": jobs.status("sft-warm"),
        "grpo": grpo_status,
        "seen": seen,
        "sft_af": sft_af,
        "grpo_af": grpo_af,
    }


@pytest.mark.e2e
def test_the_sft_job_trains_reports_progress_and_exports(chain, tiny_model):
    status, af = chain["sft"], chain["sft_af"]
    assert status["phase"] == "Succeeded"
    assert "sft_config" in condition(status, "Validated")["message"]
    assert status["accelerators"] == "cpu"
    progress = status["progress"]
    assert progress["globalStep"] == SFT_STEPS and progress["totalSteps"] == SFT_STEPS
    assert "train/loss" in progress["metrics"]
    assert status["checkpoint"]["latestStep"] == SFT_STEPS
    [attempt] = status["attempts"]
    assert attempt["result"] == "Succeeded"
    checkpoints = sorted(p.name for p in (af / "checkpoints").glob("global_step_*"))
    assert checkpoints == ["global_step_4", "global_step_6"]  # max_ckpt_to_keep: 2
    losses = {step: m["train/loss"] for step, m in read_metrics(af).items()}
    assert sorted(losses) == list(range(1, SFT_STEPS + 1))
    assert losses[SFT_STEPS] < losses[1], losses
    exported = read_weights(af / "huggingface")
    start = read_weights(tiny_model)
    assert any(not (exported[k] == start[k]).all() for k in start)


@pytest.mark.e2e
def test_the_grpo_job_waited_for_the_sft_job_then_trained_from_its_export(chain, tiny_model):
    seen, sft, grpo = chain["seen"], chain["sft"], chain["grpo"]
    held = [s for s in seen if s["waiting"].get("status") == "True"]
    messages = [s["waiting"]["message"] for s in held]
    assert any("RLTrainingJob sft-warm (phase " in m for m in messages), messages
    # Held back: Pending, no attempt, no RayCluster, until the SFT job succeeded.
    assert all(s["phase"] == "Pending" and s["attempts"] == 0 for s in held), held
    assert all(s["clusters"] == [] for s in held), held
    done = condition(grpo, WAITING)
    assert done["status"] == "False" and done["reason"] == "DependenciesSucceeded"
    [attempt] = grpo["attempts"]
    assert attempt["startTime"] >= sft["completionTime"]
    assert grpo["progress"]["globalStep"] == GRPO_STEPS

    from kuberl_api.plan import RunPlan

    submitted = RunPlan.from_json(
        (chain["grpo_af"] / ".kuberl" / "grpo-warm-1.plan.json").read_text()
    )
    assert submitted.model.path == str(chain["sft_af"] / "huggingface")
    # Trained from the SFT export, not from the random model: GRPO's two small steps leave its
    # weights far nearer the SFT export than the SFT job's six larger ones left the start.
    grpo_weights = read_weights(chain["grpo_af"] / "huggingface")
    from_sft = _distance(grpo_weights, read_weights(chain["sft_af"] / "huggingface"))
    from_start = _distance(grpo_weights, read_weights(tiny_model))
    assert from_sft < from_start / 2, (from_sft, from_start)


def _distance(a: dict[str, Any], b: dict[str, Any]) -> float:
    return sum(float((a[k].double() - b[k].double()).pow(2).sum()) for k in a) ** 0.5


@pytest.mark.e2e
def test_an_sft_attempt_killed_mid_step_resumes_to_the_same_model(
    chain, module_jobs, ray_head, tiny_model, sft_data, tmp_path
):
    jobs, af = module_jobs, tmp_path / "sft-bumpy"
    # fake_kuberl.py: the first attempt SIGKILLs itself in the middle of step 5.
    bumpy = sft_job("sft-bumpy", af, tiny_model, sft_data, SFT_STEPS, SFT_SAVE_FREQ,
                    experiment="fault-step_middle-5")  # fmt: skip
    jobs.apply(bumpy)
    phases: list[str] = []
    status = watch_to_success(
        jobs, "sft-bumpy", lambda s: s.get("phase") in phases or phases.append(s.get("phase"))
    )
    assert "Restarting" in phases, phases
    first, second = status["attempts"]
    assert first["result"] == "Failed" and second["result"] == "Succeeded"
    assert second["resumedFromStep"] in (SFT_SAVE_FREQ, 2 * SFT_SAVE_FREQ)
    assert status["restarts"] == 1 and status["progress"]["globalStep"] == SFT_STEPS
    log = ray_head["client"].logs_tail("sft-bumpy-2", max_chars=200_000)
    found = re.search(r"resuming from (\S+/global_step_(\d+))", log)
    assert found, log[-3000:]
    assert found.group(1) == str(af / "checkpoints" / "global_step_4")

    # Resumed exactly: the uninterrupted SFT job's numbers and model, bit for bit.
    expected, got = read_metrics(chain["sft_af"]), read_metrics(af)
    assert sorted(got) == list(range(1, SFT_STEPS + 1))
    for step, metrics in expected.items():
        assert got[step] == metrics, f"step {step}"
    import torch

    reference = read_weights(chain["sft_af"] / "huggingface")
    for name, tensor in read_weights(af / "huggingface").items():
        assert torch.equal(reference[name], tensor), name


@pytest.mark.cluster
def test_a_failed_sft_dependency_fails_the_job(dashboard_jobs, dashboard, tmp_path):
    jobs = dashboard_jobs
    sft = with_changes(
        valid_sft_manifest(),
        {
            "metadata.name": "sft-bad",
            "spec.af_output_dir": str(tmp_path / "sft-bad"),
            "spec.workerPools": CPU_POOL,
            "spec.runPolicy": {"backoffLimit": 0},
        },
    )
    grpo = fake_job("grpo-bad", tmp_path / "grpo-bad", "fake-steps-1-1")
    grpo["spec"]["dependsOn"] = [{"name": "sft-bad"}]
    grpo["spec"]["backend_config"]["actor_rollout_ref"]["model"]["path"] = str(
        tmp_path / "sft-bad" / "huggingface"
    )
    jobs.apply(sft)
    jobs.apply(grpo)
    wait_for("sft-bad-1 submitted", lambda: "sft-bad-1" in dashboard.submissions, timeout=300)
    held = condition(jobs.status("grpo-bad"), WAITING)
    assert held.get("status") == "True" and "RLTrainingJob sft-bad (phase" in held["message"]
    dashboard.finish("sft-bad-1", "FAILED")
    jobs.wait_phase("sft-bad", "Failed", timeout=120)
    status = jobs.wait_phase("grpo-bad", "Failed", timeout=120)
    failed = condition(status, "Failed")
    assert failed["reason"] == "DependencyFailed"
    assert "RLTrainingJob sft-bad failed" in failed["message"]
    assert clusters_of(jobs, "grpo-bad") == [] and "grpo-bad-1" not in dashboard.submissions
