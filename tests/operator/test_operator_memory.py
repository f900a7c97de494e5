"""The operator's memory follows the jobs and attempts in flight, not every tenant object it ever
saw: per-job locks exist while held, per-attempt clocks go when the attempt ends or its job is
deleted, a head's slow-failure mark goes after its cooldown, and the Ray token key id of a
cluster is read from the cluster each time instead of kept in a map."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kuberl_operator.builders import JobRef
from kuberl_operator.config import OperatorConfig
from kuberl_operator.keyed_locks import KeyedLocks
from kuberl_operator.names import ray_token_secret_name
from kuberl_operator.ray_auth import derive_token, key_id
from kuberl_operator.ray_gateway import RayGateway
from kuberl_operator.ray_jobs import DashboardUnavailable
from tests.operator.conftest import NAMESPACE, Harness

OLD, NEW = b"o" * 32, b"n" * 32


def test_keyed_locks_serialise_one_key_and_keep_nothing_once_released() -> None:
    locks = KeyedLocks()
    entered = threading.Event()

    def second() -> None:
        with locks.hold("ns/a"):
            entered.set()

    with ThreadPoolExecutor(1) as pool:
        with locks.hold("ns/a"):
            waiter = pool.submit(second)
            assert not entered.wait(0.2), "a second holder entered while the key was held"
            with locks.hold("ns/b"):  # another key is not held up
                assert len(locks) == 2
        waiter.result(timeout=10)
    assert entered.is_set()
    for index in range(1000):  # a thousand jobs reconciled one after another
        with locks.hold(f"ns/job-{index}"):
            pass
    assert len(locks) == 0


def _attempt_memory(harness: Harness) -> dict[str, int]:
    attempts = harness.reconciler.attempts
    liveness = attempts.liveness
    return {
        "unreachable": len(attempts._unreachable_since),
        "heartbeats": len(liveness._seen) + len(liveness._first_step_seen),
        "step clock": len(liveness.step_clock._last) + len(liveness.step_clock._per_step),
    }


@pytest.fixture
def running(harness: Harness) -> str:
    """The harness's job running, its step 1 reported and reconciled: the submission id."""
    sid = harness.run_until_running()
    harness.report_progress(1)
    harness.reconcile()
    return sid


def test_a_deleted_job_whose_head_never_answered_leaves_nothing_behind(harness: Harness) -> None:
    harness.reconcile()
    harness.make_cluster_ready()
    harness.ray.reachable = False  # the dashboard never answers: nothing is submitted
    harness.reconcile()
    assert harness.status["message"].endswith("waiting for the Ray dashboard")
    assert _attempt_memory(harness)["unreachable"] == 1
    harness.reconciler.finalize(harness.job)
    assert sum(_attempt_memory(harness).values()) == 0


def test_a_finished_job_leaves_no_attempt_memory(harness: Harness, running: str) -> None:
    harness.advance(30)
    harness.report_progress(2)
    harness.reconcile()
    assert _attempt_memory(harness)["heartbeats"] > 0
    harness.ray.finish(running, "SUCCEEDED", 0)
    assert harness.reconcile()["phase"] == "Succeeded"
    assert sum(_attempt_memory(harness).values()) == 0


def test_the_token_key_id_is_read_from_the_cluster_each_time(
    manifest: dict[str, Any], tmp_path: Path
) -> None:
    current, previous = tmp_path / "current", tmp_path / "previous"
    current.write_bytes(NEW + b"\n")
    previous.write_bytes(OLD + b"\n")
    config = OperatorConfig(
        backoff_base=10,
        backoff_max=60,
        ray_token_key_file=str(current),
        ray_token_previous_keys_file=str(previous),
    )
    harness = Harness(manifest, config)
    harness.run_until_running()
    ref = JobRef(harness.name, NAMESPACE, harness.job["metadata"]["uid"])
    assert harness.ray.tokens == {derive_token(NEW, ref)}
    # The cluster now names the previous key's Secret (as one made before a rotation does): the
    # next call bears that key's token, not one remembered from the first read.
    cluster = harness.kube.rayclusters["grpo-a1"]
    cluster["spec"]["authOptions"]["secretName"] = ray_token_secret_name("grpo", key_id(OLD))
    harness.ray.tokens.clear()
    harness.reconcile()
    assert harness.ray.tokens == {derive_token(OLD, ref)}


def test_slow_failure_marks_go_after_their_cooldown() -> None:
    now = [1000.0]
    gateway = RayGateway(call_timeout=0.05, cooldown=30, workers=2, clock=lambda: now[0])

    def slow_failure(head: str) -> None:
        release = threading.Event()

        def call() -> None:
            release.wait(10)
            raise OSError("reset")

        with pytest.raises(DashboardUnavailable, match="no answer"):
            gateway.call(head, "GET /api/version", call)
        release.set()
        deadline = time.monotonic() + 10
        while head in gateway._in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        assert head not in gateway._in_flight

    try:
        for index in range(5):  # heads of clusters deleted since: never called again
            slow_failure(f"http://head-{index}")
        assert len(gateway._slow_failure_at) == 5
        now[0] += 31
        slow_failure("http://head-new")
        assert set(gateway._slow_failure_at) == {"http://head-new"}
    finally:
        gateway.shutdown()


def test_a_deleted_job_takes_its_metric_series_with_it(harness: Harness, running: str) -> None:
    harness.ray.finish(running, "FAILED", 1, logs="Traceback: boom")
    assert harness.reconcile()["phase"] == "Restarting"
    registry = harness.reconciler.metrics.registry
    labels = {"namespace": NAMESPACE, "name": harness.name}
    assert registry.get_sample_value("kuberl_job_restarts_total", labels) == 1
    assert registry.get_sample_value("kuberl_job_global_step", labels) == 1
    harness.reconciler.finalize(harness.job)
    assert registry.get_sample_value("kuberl_job_restarts_total", labels) is None
    assert registry.get_sample_value("kuberl_job_global_step", labels) is None
