"""Status the operator cannot understand is reported in a condition, never fatal: a malformed
runtime timestamp, fields a newer operator wrote, a field of the wrong shape."""

from typing import Any

from kuberl_operator.status_reader import read_status


def test_malformed_heartbeat_is_ignored_and_reported(harness: Any) -> None:
    sid = harness.run_until_running()
    harness.report_progress(3)
    harness.job["status"]["progress"]["lastUpdateTime"] = "yesterday"
    harness.advance(5)
    status = harness.reconcile()  # raised ValueError on every reconcile before
    readable = harness.condition("StatusReadable")
    assert readable["status"] == "False"
    assert "status.progress.lastUpdateTime: not a timestamp" in readable["message"]
    assert status["phase"] == "Running"
    assert status["progress"]["lastUpdateTime"] == "yesterday"  # the runtime's, not rewritten
    harness.ray.finish(sid, "SUCCEEDED")
    harness.report_progress(10)
    assert harness.reconcile()["phase"] == "Succeeded"
    assert harness.condition("StatusReadable")["status"] == "True"


def test_fields_of_a_newer_operator_are_kept_and_reported(harness: Any) -> None:
    harness.run_until_running()
    status = harness.job["status"]
    status["queue"] = {"position": 3}
    status["attempts"][0]["gpuHours"] = 1.5
    harness.reconcile()
    assert harness.status["queue"] == {"position": 3}  # left as is
    message = harness.condition("StatusReadable")["message"]
    assert "status.queue: not a field" in message
    assert "status.attempts[0].gpuHours: not a field" in message
    assert harness.status["attempts"][0]["submissionId"] == "grpo-1"  # history kept


def test_a_field_of_the_wrong_shape_is_dropped_and_rewritten(harness: Any) -> None:
    harness.reconcile()
    harness.job["status"]["restarts"] = "many"
    harness.reconcile()
    assert harness.status["restarts"] == 0
    assert "status.restarts" in harness.condition("StatusReadable")["message"]


def test_read_status_keeps_everything_well_formed() -> None:
    raw = {
        "phase": "Running",
        "restarts": 2,
        "progress": {"globalStep": 4, "lastUpdateTime": "2026-11-01T12:00:00Z"},
        "attempts": [{"index": 1, "submissionId": "j-1", "result": "Running"}],
    }
    status, problems, unknown = read_status(raw)
    assert problems == [] and unknown == set()
    assert status.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True) == raw


def test_oversized_progress_metrics_are_removed_and_reported(harness: Any) -> None:
    harness.run_until_running()
    harness.report_progress(3)
    harness.job["status"]["progress"]["metrics"] = {f"m/{i}": float(i) for i in range(5000)}
    harness.advance(5)
    status = harness.reconcile()
    assert harness.kube.status_patches[-1]["progress"] == {"metrics": None}  # a merge patch
    readable = harness.condition("StatusReadable")
    assert readable["status"] == "False"
    assert "status.progress.metrics: 5000 entries, over the cap of 64" in readable["message"]
    assert status["phase"] == "Running"


def test_a_few_headline_metrics_are_left_alone(harness: Any) -> None:
    harness.run_until_running()
    harness.report_progress(3)
    harness.job["status"]["progress"]["metrics"] = {"actor/pg_loss": 0.1, "critic/score/mean": 1}
    harness.reconcile()
    assert all("progress" not in patch for patch in harness.kube.status_patches)
    assert harness.status["progress"]["metrics"]["actor/pg_loss"] == 0.1
