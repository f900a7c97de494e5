"""Rank 0's `/metrics`: every step's verl metrics as Prometheus gauges, labelled by job.

verl's metric keys become Prometheus names by one rule (`metric_name`): `critic/score/mean` ->
`kuberl_runtime_critic_score_mean`, `val-core/arith/acc/mean@4` ->
`kuberl_runtime_val_core_arith_acc_mean_at_4`. The chart's PodMonitor scrapes the container port
named `runtime-metrics`; the operator sets `KUBERL_METRICS_PORT` to that port on every Ray pod.
Locally (`kuberl train`) the server starts only when that variable is set.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Gauge, start_http_server

logger = logging.getLogger(__name__)

METRICS_PORT_ENV = "KUBERL_METRICS_PORT"
METRICS_ADDR_ENV = "KUBERL_METRICS_ADDR"
PREFIX = "kuberl_runtime_"
JOB_LABEL = "kuberl_job"
# Bookkeeping gauges beside the step's metrics: names a dashboard can rely on for every run.
STEP_GAUGES = {
    "global_step": "Training step the metrics belong to.",
    "epoch": "Epoch of that step.",
    "last_checkpoint_step": "Step of the newest complete checkpoint (0 before the first).",
}


def metric_name(key: str) -> str:
    """The Prometheus name of a verl metric key (a valid name for any input)."""
    name = key.replace("@", "_at_").lower()
    name = re.sub(r"[^a-z0-9_]+", "_", name).strip("_")
    return PREFIX + re.sub(r"_+", "_", name)


class PrometheusTracker:
    """A tracker backend: each `log` sets one gauge per metric; the server runs in a thread."""

    def __init__(self, port: int, job: str, addr: str = "0.0.0.0") -> None:
        self.registry = CollectorRegistry()
        self.job = job
        self.gauges: dict[str, Gauge] = {}
        self.server, self.thread = start_http_server(port, addr=addr, registry=self.registry)
        self.port = self.server.server_port
        for name, text in STEP_GAUGES.items():
            self._gauge(PREFIX + name, text).set(0)
        logger.info("runtime metrics at http://%s:%d/metrics", addr, self.port)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self._gauge(PREFIX + "global_step", STEP_GAUGES["global_step"]).set(step)
        for key, value in metrics.items():
            name = metric_name(key)
            if name.removeprefix(PREFIX) in STEP_GAUGES:
                self._gauge(name, STEP_GAUGES[name.removeprefix(PREFIX)]).set(value)
            else:
                self._gauge(name, f"verl metric {key}").set(value)

    def on_checkpoint(self, step: int) -> None:
        self._gauge(PREFIX + "last_checkpoint_step", "").set(step)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _gauge(self, name: str, documentation: str) -> Gauge:
        if name not in self.gauges:
            gauge = Gauge(name, documentation, [JOB_LABEL], registry=self.registry)
            self.gauges[name] = gauge
        return self.gauges[name].labels(self.job)
