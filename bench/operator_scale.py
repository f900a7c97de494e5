"""The operator under load: N RLTrainingJobs applied at once, against N KubeRay RayJobs.

    python bench/operator_scale.py            # N=200 on a fresh local control plane
    python bench/operator_scale.py --n 50 --kubeconfig .cluster/kubeconfig  # a running one

For each kind, N objects are created at once (a thread pool) and every RayCluster's ADDED event
is timed from its owner's create call: apply→RayCluster p50/p99, the total from the first apply
to the last RayCluster, and the controller's peak RSS. kuberl's jobs run the operator as a
process (`python -m kuberl_operator`); the RayJobs (InteractiveMode: no submitter pod, KubeRay
waits for a submission that never comes) get the very RayCluster spec kuberl built, so both sides
create the same pods. Every pod asks for a node no pool has, so no cluster becomes ready and no
Ray submission is reached. At the end every object must carry the right status — one RayCluster
each, phase Provisioning with ClusterReady=False (kuberl), rayClusterName set (KubeRay) — so a
lost update fails the run. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "hack"), str(ROOT / "tests")]  # localcluster, support.rljobs

from support.rljobs import GROUP, PLURAL, VERSION, crd_established, fake_job  # noqa: E402

NOWHERE = {"kuberl.io/bench": "no-such-node"}  # keeps every pod Pending: nothing gets submitted
RAY = ("ray.io", "v1")


@dataclass
class Side:
    """One controller's figures: per-object latencies (s), total (s), peak RSS (MiB)."""

    name: str
    latencies: list[float] = field(default_factory=list)
    total: float = 0.0
    peak_rss_mib: float = 0.0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    def row(self) -> str:
        return (f"{self.name:<8} n={len(self.latencies):<4} p50={self.percentile(0.5):7.3f}s "
                f"p99={self.percentile(0.99):7.3f}s total={self.total:7.2f}s "
                f"peak RSS={self.peak_rss_mib:7.1f} MiB")  # fmt: skip


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class RayClusterWatch:
    """Records when each RayCluster first appears (cluster-wide watch), sampling RSS meanwhile."""

    def __init__(self, kube_api: Any) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(kube_api)
        self.seen: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        from kubernetes import watch

        version = self.custom.list_cluster_custom_object(*RAY, "rayclusters")["metadata"][
            "resourceVersion"
        ]
        while not self.stopping.is_set():
            stream = watch.Watch()
            for event in stream.stream(self.custom.list_cluster_custom_object, *RAY, "rayclusters",
                                       resource_version=version, timeout_seconds=5):  # fmt: skip
                obj = event["object"]
                version = obj["metadata"]["resourceVersion"]
                key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                with self.lock:
                    self.seen.setdefault(key, (time.monotonic(), obj))

    def in_namespace(self, namespace: str) -> dict[str, tuple[float, dict[str, Any]]]:
        with self.lock:
            return {name: seen for (ns, name), seen in self.seen.items() if ns == namespace}


def wait_for(what: str, predicate: Callable[[], Any], timeout: float, tick: Callable[[], None]):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tick()
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def create_all(create: Callable[[dict], Any], bodies: list[dict], threads: int) -> dict[str, float]:
    """Create every body at once; return the monotonic time of each create call by name."""
    started: dict[str, float] = {}

    def one(body: dict) -> None:
        started[body["metadata"]["name"]] = time.monotonic()
        create(body)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, bodies))
    return started


def bench_jobs(n: int) -> list[dict]:
    jobs = []
    for i in range(n):
        body = fake_job(f"load-{i}", Path(f"/tmp/kuberl-bench/load-{i}"), "fake-steps-1-0")
        body["spec"]["head"] = {"nodeSelector": NOWHERE}
        body["spec"]["workerPools"][0]["nodeSelector"] = NOWHERE
        jobs.append(body)
    return jobs


def measure_kuberl(
    kube_api: Any, watch: RayClusterWatch, namespace: str, n: int, operator_pid: int,
    threads: int, timeout: float,
) -> tuple[Side, dict[str, Any]]:  # fmt: skip
    """Apply N jobs; time their RayClusters; check each job's status. Returns a cluster spec."""
    custom = watch.custom
    side = Side("kuberl")

    def sample() -> None:
        side.peak_rss_mib = max(side.peak_rss_mib, rss_mib(operator_pid))

    def create(body: dict) -> None:
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    started = create_all(create, bench_jobs(n), threads)
    clusters = wait_for(f"{n} RayClusters from kuberl",
                        lambda: (seen := watch.in_namespace(namespace)) and len(seen) >= n and seen,
                        timeout, sample)  # fmt: skip
    for at, obj in clusters.values():
        owner = obj["metadata"]["labels"]["kuberl.io/job"]
        side.latencies.append(at - started[owner])
    side.total = max(at for at, _ in clusters.values()) - min(started.values())

    def settled() -> bool:
        items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]
        return len(items) == n and all(_kuberl_settled(item) for item in items)

    wait_for("every job Provisioning with ClusterReady=False", settled, timeout, sample)
    listed = custom.list_namespaced_custom_object(*RAY, namespace, "rayclusters")["items"]
    assert sorted(rc["metadata"]["name"] for rc in listed) == sorted(
        f"load-{i}-a1" for i in range(n)
    ), "a RayCluster is missing or duplicated"
    return side, next(iter(clusters.values()))[1]["spec"]


def _kuberl_settled(job: dict) -> bool:
    status = job.get("status") or {}
    ready = next((c for c in status.get("conditions", []) if c["type"] == "ClusterReady"), {})
    attempts = status.get("attempts") or []
    return (status.get("phase") == "Provisioning" and ready.get("status") == "False"
            and len(attempts) == 1 and attempts[0].get("rayCluster")
            == f"{job['metadata']['name']}-a1")  # fmt: skip


def measure_kuberay(
    watch: RayClusterWatch, namespace: str, n: int, cluster_spec: dict[str, Any],
    kuberay_pid: int | None, threads: int, timeout: float,
) -> Side:  # fmt: skip
    custom = watch.custom
    side = Side("KubeRay")

    def sample() -> None:
        if kuberay_pid:
            side.peak_rss_mib = max(side.peak_rss_mib, rss_mib(kuberay_pid))

    def create(body: dict) -> None:
        custom.create_namespaced_custom_object(*RAY, namespace, "rayjobs", body)

    bodies = [
        {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": f"load-{i}"},
         "spec": {"submissionMode": "InteractiveMode", "rayClusterSpec": cluster_spec}}
        for i in range(n)
    ]  # fmt: skip
    started = create_all(create, bodies, threads)
    clusters = wait_for(f"{n} RayClusters from KubeRay",
                        lambda: (seen := watch.in_namespace(namespace)) and len(seen) >= n and seen,
                        timeout, sample)  # fmt: skip
    for at, obj in clusters.values():
        [owner] = [ref["name"] for ref in obj["metadata"]["ownerReferences"]]
        side.latencies.append(at - started[owner])
    side.total = max(at for at, _ in clusters.values()) - min(started.values())

    def settled() -> bool:
        items = custom.list_namespaced_custom_object(*RAY, namespace, "rayjobs")["items"]
        return len(items) == n and all((i.get("status") or {}).get("rayClusterName") for i in items)

    wait_for("every RayJob naming its RayCluster", settled, timeout, sample)
    listed = custom.list_namespaced_custom_object(*RAY, namespace, "rayclusters")["items"]
    assert len(listed) == n, f"{len(listed)} RayClusters for {n} RayJobs"
    return side


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


def run(
    kube_api: Any, ours: str, n: int, operator_pid: int, kuberay_pid: int | None,
    threads: int = 8, timeout: float = 600,
) -> tuple[Side, Side]:  # fmt: skip
    """Both sides in one run: kuberl's jobs in `ours` (watched by the operator), then RayJobs."""
    watch = RayClusterWatch(kube_api)
    watch.thread.start()
    time.sleep(0.5)  # let the watch open before the first create
    try:
        kuberl, cluster_spec = measure_kuberl(kube_api, watch, ours, n, operator_pid, threads,
                                              timeout)  # fmt: skip
        print(kuberl.row(), flush=True)  # kept even if the KubeRay side then times out
        with namespace(kube_api, "rayjobs") as theirs:
            kuberay = measure_kuberay(watch, theirs, n, cluster_spec, kuberay_pid, threads,
                                      timeout)  # fmt: skip
    finally:
        watch.stopping.set()
    return kuberl, kuberay


def report(kuberl: Side, kuberay: Side) -> str:
    ratio = lambda a, b: a / b if b else float("nan")  # noqa: E731
    return "\n".join([
        kuberl.row(), kuberay.row(),
        f"kuberl/KubeRay: p50 {ratio(kuberl.percentile(0.5), kuberay.percentile(0.5)):.2f}x  "
        f"p99 {ratio(kuberl.percentile(0.99), kuberay.percentile(0.99)):.2f}x  "
        f"total {ratio(kuberl.total, kuberay.total):.2f}x  "
        f"peak RSS {ratio(kuberl.peak_rss_mib, kuberay.peak_rss_mib):.2f}x",
    ])  # fmt: skip


# --- standalone: a control plane, the CRD and the operator, then the run ------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--threads", type=int, default=8, help="concurrent create calls")
    parser.add_argument("--kubeconfig", help="a running cluster's (default: start one)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per side")
    parser.add_argument("--out", type=Path, help="also write the command and figures here")
    args = parser.parse_args(argv)
    import localcluster
    from kubernetes import config

    with contextlib.ExitStack() as stack:
        if args.kubeconfig:
            kubeconfig = args.kubeconfig
            state = localcluster.load_state(Path(args.kubeconfig).parent)
        else:
            state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kuberl-")))
            state = localcluster.up(state_dir)
            stack.callback(localcluster.down, state_dir)
            kubeconfig = state.kubeconfig
        kuberay_pid = state.pids().get("ray-operator") if state else None
        kube_api = config.new_client_from_config(config_file=kubeconfig)
        kubectl = localcluster.require_binaries().kubectl
        crd = ROOT / "crds" / "rltrainingjobs.kuberl.io.yaml"
        base = [str(kubectl), f"--kubeconfig={kubeconfig}"]
        subprocess.run([*base, "apply", "--server-side", "--force-conflicts", "-f", str(crd)],
                       check=True, capture_output=True)  # fmt: skip
        wait_for("the RLTrainingJob CRD Established", lambda: crd_established(kube_api), 60,
                 lambda: None)  # fmt: skip
        ours = stack.enter_context(namespace(kube_api, "kuberl"))
        operator = stack.enter_context(operator_process(kubeconfig, ours))
        kuberl, kuberay = run(kube_api, ours, args.n, operator.pid, kuberay_pid, args.threads,
                              args.timeout)  # fmt: skip
        print(report(kuberl, kuberay))
        if args.out:
            command = " ".join(["python bench/operator_scale.py", *(argv or sys.argv[1:])])
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            args.out.write_text(f"$ {command}\n# {when}, {os.cpu_count()} CPUs\n"
                                f"{report(kuberl, kuberay)}\n")  # fmt: skip
    return 0


@contextlib.contextmanager
def operator_process(kubeconfig: str, namespace: str) -> Iterator[subprocess.Popen]:
    import urllib.request

    from localray import free_port

    liveness = f"http://127.0.0.1:{free_port()}/healthz"
    argv = [sys.executable, "-m", "kuberl_operator", "-n", namespace, "--metrics-host",
            "127.0.0.1", "--metrics-port", str(free_port()), "--liveness", liveness]  # fmt: skip
    log = tempfile.NamedTemporaryFile(prefix="kuberl-operator-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen(argv, env={**os.environ, "KUBECONFIG": kubeconfig}, stdout=log,
                               stderr=subprocess.STDOUT)  # fmt: skip

    def alive() -> bool:
        assert process.poll() is None, f"the operator exited; see {log.name}"
        with contextlib.suppress(OSError), urllib.request.urlopen(liveness, timeout=2):
            return True
        return False

    try:
        wait_for("operator liveness", alive, 60, lambda: None)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()  # figures are taken; a slow shutdown must not lose them
        print(f"operator log: {log.name}")


if __name__ == "__main__":
    sys.exit(main())
