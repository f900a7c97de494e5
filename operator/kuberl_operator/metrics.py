"""Prometheus metrics: controller-runtime's names (so existing dashboards work) plus kuberl's."""

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

CONTROLLER = "rltrainingjob"
PHASES = ("Pending", "Provisioning", "Running", "Restarting", "Suspended", "Succeeded", "Failed")
_RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_STARTUP_BUCKETS = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1200, 3600)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Reconciliations per controller and result.",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Reconciliations that raised.",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Time per reconciliation.",
            ["controller"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.jobs = Gauge("kuberl_jobs", "RLTrainingJobs per phase.", ["phase"], registry=r)
        self.restarts = Counter(
            "kuberl_job_restarts_total",
            "Attempts restarted after a failure.",
            ["namespace", "name"],
            registry=r,
        )
        self.global_step = Gauge(
            "kuberl_job_global_step",
            "Latest training step reported by a job.",
            ["namespace", "name"],
            registry=r,
        )
        self.time_to_cluster_ready = Histogram(
            "kuberl_job_time_to_cluster_ready_seconds",
            "From attempt start to a ready RayCluster.",
            buckets=_STARTUP_BUCKETS,
            registry=r,
        )
        self.time_to_first_step = Histogram(
            "kuberl_job_time_to_first_step_seconds",
            "From attempt start to its first reported training step.",
            buckets=_STARTUP_BUCKETS,
            registry=r,
        )
        self._phases: dict[str, str] = {}
        for phase in PHASES:
            self.jobs.labels(phase).set(0)

    def observe_phase(self, uid: str, phase: str | None) -> None:
        """O(1): only the job's old and new phase move (was a recount of every job per call)."""
        before = self._phases.pop(uid, None) if phase is None else self._phases.get(uid)
        if phase is not None:
            self._phases[uid] = phase
        if before == phase:
            return
        if before is not None:
            self.jobs.labels(before).dec()
        if phase is not None:
            self.jobs.labels(phase).inc()

    def forget(self, uid: str, namespace: str, name: str) -> None:
        """A deleted job's series go with it: per-job labels would otherwise grow forever."""
        self.observe_phase(uid, None)
        for series in (self.global_step, self.restarts):
            with contextlib.suppress(KeyError):
                series.remove(namespace, name)

    def serve(self, host: str, port: int) -> None:
        start_http_server(port, addr=host, registry=self.registry)
