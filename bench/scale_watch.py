"""What bench/operator_scale.py measures with: per-object first-seen times from watches, and a
controller process's CPU seconds and peak RSS from /proc."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Process:
    pid: int

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0


@dataclass
class Side:
    """One controller's figures: per-object latencies (s), CPU seconds over the run, peak RSS."""

    name: str
    process: Process
    latencies: list[float] = field(default_factory=list)
    extra: dict[str, list[float]] = field(default_factory=dict)
    total: float = 0.0
    cpu_seconds: float = 0.0
    peak_rss_mib: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)
    _cpu_start: float = 0.0

    def begin(self) -> None:
        self._cpu_start = self.process.cpu_seconds()

    def sample(self) -> None:
        self.peak_rss_mib = max(self.peak_rss_mib, self.process.peak_rss_mib())

    def end(self) -> None:
        self.cpu_seconds = self.process.cpu_seconds() - self._cpu_start
        self.sample()

    @staticmethod
    def _percentile(values: list[float], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0

    def percentile(self, q: float) -> float:
        return self._percentile(self.latencies, q)

    def p(self, key: str, q: float) -> float:
        return self._percentile(self.extra.get(key, []), q)

    def row(self, what: str) -> str:
        return (f"{self.name:<8} n={len(self.latencies):<4} {what}: "
                f"p50={self.percentile(0.5):7.2f}s "
                f"p99={self.percentile(0.99):7.2f}s all={self.total:7.1f}s "
                f"CPU={self.cpu_seconds:6.1f}s peak RSS={self.peak_rss_mib:6.1f} MiB")  # fmt: skip


class Stopwatch:
    """Watches a namespace's RayClusters, RLTrainingJobs and Services; records when each object
    (or each job's Validated=True, each RayCluster's first status) was first seen."""

    def __init__(self, kube_api: Any, namespace: str) -> None:
        from kubernetes import client

        from support.rljobs import GROUP, PLURAL, VERSION

        custom, core = client.CustomObjectsApi(kube_api), client.CoreV1Api(kube_api)
        self.seen: dict[str, dict[str, float]] = {
            k: {} for k in ("rayclusters", "clusterstatus", "services", "validated")
        }
        self._jobs: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        listers = {
            "rayclusters": lambda **kw: custom.list_namespaced_custom_object(
                "ray.io", "v1", namespace, "rayclusters", **kw),
            "jobs": lambda **kw: custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, **kw),
            "services": lambda **kw: core.list_namespaced_service(namespace, **kw),
        }  # fmt: skip
        self.threads = [
            threading.Thread(target=self._run, args=(kind, lister), daemon=True)
            for kind, lister in listers.items()
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()
        time.sleep(1.0)  # let the watches open before the first create

    def stop(self) -> None:
        self.stopping.set()

    def _run(self, kind: str, lister: Callable[..., Any]) -> None:
        from kubernetes.watch.watch import iter_resp_lines

        listed = json.loads(lister(_preload_content=False).data)
        version = listed["metadata"]["resourceVersion"]
        for obj in listed["items"]:
            self._record(kind, obj)
        while not self.stopping.is_set():
            response = lister(watch=True, resource_version=version, timeout_seconds=5,
                              allow_watch_bookmarks=True, _preload_content=False)  # fmt: skip
            for line in iter_resp_lines(response):
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    raise RuntimeError(f"{kind} watch: {obj}")
                version = obj["metadata"].get("resourceVersion", version)
                if event["type"] in ("ADDED", "MODIFIED"):
                    self._record(kind, obj)
            response.release_conn()

    def _record(self, kind: str, obj: dict[str, Any]) -> None:
        now, name = time.monotonic(), obj["metadata"]["name"]
        with self.lock:
            if kind == "jobs":
                self._jobs[name] = obj
                if validated(obj):
                    self.seen["validated"].setdefault(name, now)
                return
            self.seen[kind].setdefault(name, now)
            if kind == "rayclusters" and obj.get("status"):
                self.seen["clusterstatus"].setdefault(name, now)

    def first_seen(self, kind: str, name: str) -> float:
        with self.lock:
            return self.seen[kind][name]

    def complete(self, n: int) -> bool:
        with self.lock:
            heads = [s for s in self.seen["services"] if s.endswith("-head-svc")]
            kinds = ("rayclusters", "validated", "clusterstatus")
            return len(heads) >= n and all(len(self.seen[k]) >= n for k in kinds)

    def jobs(self) -> dict[str, dict[str, Any]]:
        with self.lock:
            return dict(self._jobs)


def validated(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Validated" and c["status"] == "True" for c in conditions)


def wait_for(what: str, predicate: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@contextlib.contextmanager
def namespace(kube_api: Any, prefix: str) -> Iterator[str]:
    from kubernetes import client

    core = client.CoreV1Api(kube_api)
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        core.delete_namespace(name)
