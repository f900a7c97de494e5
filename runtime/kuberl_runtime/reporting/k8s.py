"""``StatusReporter``: the trainer's progress patched into its RLTrainingJob's status.

The operator gives each job a ServiceAccount that may get/patch only that job's status, and
sets KUBERL_JOB_NAME/KUBERL_JOB_NAMESPACE on every pod and submission. Outside a cluster (no
in-cluster credentials and no KUBERL_KUBECONFIG) there is nowhere to report: no reporter.
A failed patch is logged and dropped; training never stops because status could not be written.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kuberl_api.job import GROUP, PLURAL, VERSION, CheckpointStatus, Progress

log = logging.getLogger(__name__)

Patch = Callable[[dict[str, Any]], None]
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# The few metrics a `kubectl get rlj -o yaml` reader wants; the rest stay in the trackers.
HEADLINE_METRICS = (
    "critic/score/mean",
    "critic/rewards/mean",
    "actor/pg_loss",
    "actor/kl_loss",
    "actor/entropy",
    "response_length/mean",
    "perf/throughput",
    "train/loss",  # SFT
    "val/loss",
)


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusReporter:
    """A ``kuberl_runtime.tracking.ProgressReporter`` that writes ``status.progress/checkpoint``."""

    def __init__(
        self, patch: Patch, clock: Callable[[], float] = time.time, min_interval: float = 2.0
    ) -> None:
        self._patch = patch
        self._clock = clock
        self._min_interval = min_interval
        self._start_time = clock()
        self._start_step = 0
        self._total_steps: int | None = None
        self._step = 0
        self._last_sent = -math.inf
        self._lock = threading.Lock()  # phases.py beats from a thread

    def on_start(self, *, start_step: int, total_steps: int) -> None:
        self._start_time, self._start_step = self._clock(), start_step
        self._send_progress(start_step, total_steps, {}, force=True)

    def on_step(self, *, step: int, total_steps: int, metrics: Mapping[str, float]) -> None:
        self._send_progress(step, total_steps, metrics, force=step >= total_steps)

    def on_checkpoint(self, *, step: int, path: str) -> None:
        # Progress goes with the checkpoint, so a reader never sees a checkpoint ahead of the step.
        now = self._clock()
        checkpoint = CheckpointStatus.model_validate(
            {"latestStep": step, "latestPath": path, "lastSavedTime": _timestamp(now)}
        )
        self._last_sent = now
        self._send(
            {
                "checkpoint": checkpoint.model_dump(by_alias=True, exclude_none=True),
                "progress": self._progress(step, self._total_steps, {}, now),
            }
        )

    def on_finish(self, *, step: int, exported_model: str | None) -> None:
        self._send_progress(step, None, {}, force=True)

    def on_phase(self, phase: str) -> None:
        """A heartbeat during a long phase (phases.py): the last step, a new lastUpdateTime."""
        log.debug("heartbeat during %s", phase)
        self._send_progress(self._step, self._total_steps, {}, force=True)

    def on_initializing(self, done_bytes: int, total_bytes: int) -> None:
        """The model/data initializer's heartbeat: step 0, the bytes copied so far."""
        now = self._clock()
        if done_bytes < total_bytes and now - self._last_sent < self._min_interval:
            return
        self._last_sent = now
        progress = {
            "globalStep": 0,
            "lastUpdateTime": _timestamp(now),
            "metrics": {
                "initializer/copied_bytes": float(done_bytes),
                "initializer/total_bytes": float(total_bytes),
            },
        }
        model = Progress.model_validate(progress)
        self._send({"progress": model.model_dump(by_alias=True, exclude_none=True)})

    def _send_progress(
        self, step: int, total_steps: int | None, metrics: Mapping[str, float], force: bool
    ) -> None:
        self._total_steps = total_steps or self._total_steps
        self._step = step
        now = self._clock()
        if not force and now - self._last_sent < self._min_interval:
            return
        self._last_sent = now
        self._send({"progress": self._progress(step, total_steps, metrics, now)})

    def _progress(
        self, step: int, total_steps: int | None, metrics: Mapping[str, float], now: float
    ) -> dict[str, Any]:
        progress: dict[str, Any] = {"globalStep": step, "lastUpdateTime": _timestamp(now)}
        if total_steps:
            progress["totalSteps"] = total_steps
            progress["percent"] = min(100, step * 100 // total_steps)
            done = step - self._start_step
            if done > 0:
                rate = (now - self._start_time) / done
                progress["estimatedRemainingSeconds"] = int(rate * max(total_steps - step, 0))
        headline = {
            key: float(value)
            for key, value in metrics.items()
            if key in HEADLINE_METRICS and math.isfinite(float(value))
        }
        if headline:
            progress["metrics"] = headline
        return Progress.model_validate(progress).model_dump(by_alias=True, exclude_none=True)

    def _send(self, status: dict[str, Any]) -> None:
        try:
            with self._lock:
                self._patch(status)
        except Exception as err:  # reporting must never break training
            log.warning("could not patch job status: %s", err)


def status_reporter_from_env(environ: Mapping[str, str] | None = None) -> StatusReporter | None:
    """A reporter for the job named in the environment, or None where there is no cluster."""
    env = os.environ if environ is None else environ
    name, namespace = env.get("KUBERL_JOB_NAME"), env.get("KUBERL_JOB_NAMESPACE")
    if not name or not namespace:
        return None
    api = _api_client(env)
    if api is None:
        return None
    from kubernetes import client

    objects = client.CustomObjectsApi(api)

    def patch(status: dict[str, Any]) -> None:
        objects.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, {"status": status}
        )

    return StatusReporter(patch)


def initializer_heartbeat() -> Callable[[int, int], None] | None:
    """Where the initializer reports its bytes copied: the job's status, in a cluster."""
    reporter = status_reporter_from_env()
    return reporter.on_initializing if reporter is not None else None


def _api_client(env: Mapping[str, str]) -> Any:
    in_cluster = bool(env.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(SERVICE_ACCOUNT_TOKEN)
    kubeconfig = env.get("KUBERL_KUBECONFIG")
    if not in_cluster and not kubeconfig:
        return None
    try:
        from kubernetes import client, config
    except ImportError:
        log.warning("the kubernetes client is not installed: progress is not reported")
        return None
    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)
