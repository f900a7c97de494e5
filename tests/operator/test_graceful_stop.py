"""Suspend waits (bounded) for the stopped Ray job before deleting its cluster; terminal status is
written before the cluster goes; the Ray pods carry a grace period and a preStop hook that lets
the ranks save (operator/kuberl_operator/stopping.py, builders/graceful_stop.py)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kuberl_operator.builders.graceful_stop import prestop_command
from tests.operator.conftest import FakeKube, FakeRay, Harness


class SlowStopRay(FakeRay):
    """A head whose stopped job keeps RUNNING until the test ends it (its ranks are saving)."""

    def stop(self, sid: str) -> bool:
        self._check()
        self.stopped.append(sid)
        return True


class CrashingDeleteKube(FakeKube):
    """The operator dies while deleting a RayCluster (once)."""

    crash = False

    def delete_raycluster(self, namespace: str, name: str) -> None:
        if self.crash:
            self.crash = False
            raise RuntimeError("operator killed while deleting the RayCluster")
        super().delete_raycluster(namespace, name)


def _slow(harness: Harness) -> Harness:
    harness.ray = SlowStopRay()
    harness.reconciler = harness.new_reconciler()
    return harness


def _suspend(harness: Harness, suspend: bool = True) -> dict[str, Any]:
    harness.set_spec({"spec.runPolicy": {"suspend": suspend}})
    return harness.reconcile()


def test_suspend_keeps_the_cluster_until_the_stopped_ray_job_ends(harness: Harness) -> None:
    _slow(harness)
    sid = harness.run_until_running()
    harness.report_progress(6, checkpoint=6)
    status = _suspend(harness)
    assert harness.ray.stopped == [sid] and status["phase"] == "Suspended"
    stopping = harness.condition("Suspended")
    assert stopping["reason"] == "Stopping"
    assert "300s" in stopping["message"] and "--stop-grace-seconds" in stopping["message"]
    harness.advance(20)
    harness.reconcile()
    assert list(harness.kube.rayclusters) == ["grpo-a1"]  # the ranks are still saving
    harness.report_progress(7, checkpoint=7)  # the step in flight, saved at the signal
    harness.ray.finish(sid, "STOPPED")
    harness.advance(5)
    harness.reconcile()
    assert harness.kube.rayclusters == {}
    done = harness.condition("Suspended")
    assert done["reason"] == "RayJobStopped" and "step 7" in done["message"]
    assert "25s" in done["message"]
    status = _suspend(harness, False)
    assert status["attempts"][1]["resumedFromStep"] == 7 and status["restarts"] == 0


def test_a_stop_past_its_grace_period_deletes_the_cluster_and_says_so(harness: Harness) -> None:
    _slow(harness)
    harness.run_until_running()
    harness.report_progress(3, checkpoint=2)
    _suspend(harness)
    harness.advance(299)
    harness.reconcile()
    assert list(harness.kube.rayclusters) == ["grpo-a1"]
    harness.advance(2)
    harness.reconcile()
    assert harness.kube.rayclusters == {}
    late = harness.condition("Suspended")
    assert late["reason"] == "StopDeadlinePassed"
    assert "still RUNNING 300s" in late["message"] and "--stop-grace-seconds" in late["message"]
    assert "step 2" in late["message"]
    assert any(e.reason == "StopDeadlinePassed" and e.type == "Warning" for e in harness.events)


def test_lifting_suspend_mid_stop_starts_nothing_until_it_settles(harness: Harness) -> None:
    _slow(harness)
    sid = harness.run_until_running()
    _suspend(harness)
    status = _suspend(harness, False)
    assert len(status["attempts"]) == 1 and list(harness.kube.rayclusters) == ["grpo-a1"]
    harness.ray.finish(sid, "FAILED", 143)
    status = harness.reconcile()
    assert len(status["attempts"]) == 2  # settled: the cluster went, the next attempt started
    assert harness.condition("Suspended")["reason"] == "Resumed"
    assert ("RayCluster", "grpo-a1") in harness.kube.deleted


def test_terminal_status_is_written_before_the_cluster_is_deleted(
    manifest: dict[str, Any], config: Any
) -> None:
    harness = Harness(manifest, config)
    crashing = CrashingDeleteKube()
    crashing.jobs = harness.kube.jobs
    harness.kube = crashing
    harness.reconciler = harness.new_reconciler()
    sid = harness.run_until_running()
    harness.ray.finish(sid, "SUCCEEDED", 0)
    crashing.crash = True
    with pytest.raises(RuntimeError, match="killed while deleting"):
        harness.reconcile()
    assert harness.status["phase"] == "Succeeded"  # written before the deletion was tried
    assert harness.status["attempts"][0]["result"] == "Succeeded"
    assert list(harness.kube.rayclusters) == ["grpo-a1"]
    harness.reconciler = harness.new_reconciler()  # the restarted operator finishes the job
    status = harness.reconcile()
    assert status["phase"] == "Succeeded" and len(status["attempts"]) == 1
    assert harness.kube.rayclusters == {} and status["rayCluster"]["state"] == "Deleted"


def test_every_ray_pod_gets_the_grace_period_and_the_prestop_hook(harness: Harness) -> None:
    harness.reconcile()
    (cluster,) = harness.kube.rayclusters.values()
    groups = [cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]]
    for group in groups:
        pod = group["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] == 300
        (container,) = pod["containers"]
        command = container["lifecycle"]["preStop"]["exec"]["command"]
        assert command == prestop_command(300) and command[-2:] == ["/proc", "295"]


# --- the preStop hook itself, on processes of this test only ---------------------------------

DRIVER = """
import pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
def on_term(*_):
    marker.write_text("TERM")
    time.sleep(1)  # the ranks save
    sys.exit(143)
signal.signal(signal.SIGTERM, on_term)
pathlib.Path(sys.argv[2]).touch()
time.sleep(60)
"""
RANK = """
import os, pathlib, time
stop = pathlib.Path(os.environ["KUBERL_STOP_FILE"])
while not stop.exists():
    time.sleep(0.1)
time.sleep(1)  # finish the step in flight and save
"""


def _spawn(code: str, env: dict[str, str], *argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *argv], env={**os.environ, **env})


def _proc_root(tmp_path: Path, *processes: subprocess.Popen) -> Path:
    """A /proc holding only these processes (links to their real entries)."""
    root = tmp_path / "proc"
    root.mkdir()
    for process in processes:
        (root / str(process.pid)).symlink_to(f"/proc/{process.pid}")
    return root


def _wait_ready(ready: Path) -> None:
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert time.monotonic() < deadline, f"{ready} never appeared"
        time.sleep(0.05)


def test_the_prestop_hook_stops_the_driver_and_ranks_and_waits_for_them(tmp_path: Path) -> None:
    job = {"KUBERL_SUBMISSION_ID": "grpo-1"}
    stop_file, marker = tmp_path / ".kuberl-stop-grpo-1", tmp_path / "driver-signal"
    ready = tmp_path / "driver-ready"
    driver = _spawn(DRIVER, job, str(marker), str(ready), "kuberl", "train", "--plan", "p.json")
    rank = _spawn(RANK, {**job, "KUBERL_STOP_FILE": str(stop_file)})
    bystander = _spawn("import time; time.sleep(60)", {})  # `ray start`: neither signalled
    try:
        _wait_ready(ready)  # its SIGTERM handler is in place
        root = _proc_root(tmp_path, driver, rank, bystander)
        # A 600 s grace: the hook returns once both ended, long before (else TimeoutExpired).
        done = subprocess.run(prestop_command(600, str(root)), timeout=60, check=False)
        assert done.returncode == 0
        assert marker.read_text() == "TERM" and stop_file.exists()
        assert driver.poll() == 143 and rank.poll() == 0  # both ended before the hook did
        assert bystander.poll() is None
    finally:
        for process in (driver, rank, bystander):
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
            process.wait()


def test_the_prestop_hook_gives_up_before_the_grace_period_ends(tmp_path: Path) -> None:
    stuck = _spawn("import time; time.sleep(60)", {"KUBERL_SUBMISSION_ID": "grpo-1"})
    try:
        root = _proc_root(tmp_path, stuck)
        # 7 s of grace: the hook waits 2 s, then returns with the process still running.
        done = subprocess.run(prestop_command(7, str(root)), timeout=30, check=False)
        assert done.returncode == 0 and stuck.poll() is None
    finally:
        stuck.kill()
        stuck.wait()
