"""The operator under load: N RLTrainingJobs applied at once, beside KubeRay reconciling the very
RayClusters they get, in the same run on the same control plane.

    python bench/operator_scale.py --n 1000 --out bench/results/operator_scale-1000.txt
    python bench/operator_scale.py --n 50 --kubeconfig .cluster/kubeconfig  # a running one

kuberl's side: each job's apply → its RayCluster (ADDED) and → Validated=True in its status; the
operator's requests (it talks to the API server through `kubectl proxy -v=6`, which logs every
request, kopf's included), CPU seconds and peak RSS. KubeRay's side, on the same RayClusters: each
RayCluster's ADDED → KubeRay's head Service for it and → its first status; KubeRay's CPU seconds
over the same window and its peak RSS. Every pod asks for a node no pool has (the kwok pools hold
220 pods, 1,000 jobs make 2,000), so no cluster becomes ready and nothing reaches Ray: both sides
do the same provisioning work. At the end every job must carry the right status (one attempt,
its RayCluster, Provisioning, Validated) and every RayCluster its head Service, so a lost update
fails the run. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "hack"), str(ROOT / "tests"), str(ROOT / "bench")]

from scale_watch import Process, Side, Stopwatch, namespace, validated, wait_for  # noqa: E402

from support.rljobs import GROUP, PLURAL, VERSION, crd_established, fake_job  # noqa: E402

NOWHERE = {"kuberl.io/bench": "no-such-node"}  # keeps every pod Pending: nothing gets submitted


def bench_jobs(n: int) -> list[dict]:
    jobs = []
    for i in range(n):
        body = fake_job(f"load-{i}", Path(f"/tmp/kuberl-bench/load-{i}"), "fake-steps-1-0")
        body["spec"]["head"] = {"nodeSelector": NOWHERE}
        body["spec"]["workerPools"][0]["nodeSelector"] = NOWHERE
        jobs.append(body)
    return jobs


def settled(job: dict) -> bool:
    status = job.get("status") or {}
    attempts = status.get("attempts") or []
    return (validated(job) and status.get("phase") == "Provisioning" and len(attempts) == 1
            and attempts[0].get("rayCluster") == f"{job['metadata']['name']}-a1")  # fmt: skip


def run(
    kube_api: Any, namespace: str, n: int, operator: Process, kuberay: Process,
    threads: int = 8, timeout: float = 600, requests: Any = None,
) -> tuple[Side, Side]:  # fmt: skip
    """Apply N jobs in `namespace` (watched by the operator); time both controllers' work."""
    from kubernetes import client

    custom = client.CustomObjectsApi(kube_api)
    watch = Stopwatch(kube_api, namespace)
    watch.start()
    ours, theirs = Side("kuberl", operator), Side("KubeRay", kuberay)
    ours.begin(), theirs.begin()
    started: dict[str, float] = {}

    def create(body: dict) -> None:
        started[body["metadata"]["name"]] = time.monotonic()
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)

    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(create, bench_jobs(n)))
        first = min(started.values())

        def done() -> bool:
            ours.sample(), theirs.sample()
            return watch.complete(n)

        wait_for(f"{n} jobs Validated with a RayCluster, each with KubeRay's head Service", done,
                 timeout)  # fmt: skip
        ours.end(), theirs.end()
        for name, at in started.items():
            cluster = watch.first_seen("rayclusters", f"{name}-a1")
            ours.latencies.append(cluster - at)
            ours.extra.setdefault("apply->Validated", []).append(
                watch.first_seen("validated", name) - at
            )
            service = watch.first_seen("services", f"{name}-a1-head-svc")
            theirs.latencies.append(service - cluster)
            theirs.extra.setdefault("RayCluster->status", []).append(
                watch.first_seen("clusterstatus", f"{name}-a1") - cluster
            )
        ours.total = max(watch.first_seen("rayclusters", f"{k}-a1") for k in started) - first
        theirs.total = (
            max(watch.first_seen("services", f"{k}-a1-head-svc") for k in started) - first
        )
        if requests is not None:
            ours.requests = requests()
        every_job = lambda: all(settled(j) for j in watch.jobs().values()) or None  # noqa: E731
        wait_for("every job Provisioning with its one attempt", every_job, timeout)
        listed = custom.list_namespaced_custom_object("ray.io", "v1", namespace, "rayclusters")
        names = sorted(rc["metadata"]["name"] for rc in listed["items"])
        assert names == sorted(f"load-{i}-a1" for i in range(n)), "a RayCluster lost or doubled"
    finally:
        watch.stop()
    return ours, theirs


def report(kuberl: Side, kuberay: Side, n: int) -> str:
    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b else "n/a"

    lines = [
        kuberl.row("apply->RayCluster"), kuberay.row("RayCluster->head Service"),
        f"kuberl apply->Validated: p50 {kuberl.p('apply->Validated', 0.5):.2f}s "
        f"p99 {kuberl.p('apply->Validated', 0.99):.2f}s; "
        f"KubeRay RayCluster->status: p50 {kuberay.p('RayCluster->status', 0.5):.2f}s "
        f"p99 {kuberay.p('RayCluster->status', 0.99):.2f}s",
    ]  # fmt: skip
    if kuberl.requests:
        total = sum(kuberl.requests.values())
        verbs = ", ".join(
            f"{verb} {count / n:.2f}" for verb, count in sorted(kuberl.requests.items())
        )
        lines.append(f"kuberl API requests: {total} = {total / n:.2f} per job ({verbs})")
    lines.append(
        f"kuberl/KubeRay: p50 {ratio(kuberl.percentile(0.5), kuberay.percentile(0.5))}  "
        f"p99 {ratio(kuberl.percentile(0.99), kuberay.percentile(0.99))}  "
        f"CPU {ratio(kuberl.cpu_seconds, kuberay.cpu_seconds)}  "
        f"peak RSS {ratio(kuberl.peak_rss_mib, kuberay.peak_rss_mib)}"
    )
    return "\n".join(lines)


# --- standalone: a control plane, the CRD, a counting proxy and the operator, then the run -----

# client-go's round-tripper log at -v=6: `"Response" verb="GET" url="https://..." status="200 OK"`
REQUEST_LINE = re.compile(r'verb="(GET|POST|PUT|PATCH|DELETE)" url="[^"?]*(\?[^"]*)?" status=')


def count_requests(log: Path) -> Counter[str]:
    """The proxy's request lines by verb (a GET with watch=true is a WATCH)."""
    counts: Counter[str] = Counter()
    for match in REQUEST_LINE.finditer(log.read_text(errors="replace")):
        verb, query = match.group(1), match.group(2) or ""
        counts["WATCH" if "watch=true" in query else verb] += 1
    return counts


@contextlib.contextmanager
def counting_proxy(kubectl: str, kubeconfig: str, workdir: Path) -> Iterator[tuple[str, Path]]:
    """`kubectl proxy` on a free port logging every request: a kubeconfig for it, and its log."""
    from freeport import free_port

    port, log = free_port(), workdir / "proxy.log"
    argv = [kubectl, f"--kubeconfig={kubeconfig}", "proxy", f"--port={port}", "--address=127.0.0.1",
            "--accept-hosts=^127\\.0\\.0\\.1$", "-v=6"]  # fmt: skip
    with log.open("w") as out:
        proxy = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    proxied = workdir / "proxied.kubeconfig"
    proxied.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: p\n"
        f"clusters: [{{name: p, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: p, user: {}}]\ncontexts: [{name: p, context: {cluster: p, user: p}}]\n"
    )
    try:
        wait_for("kubectl proxy", lambda: "Starting to serve" in log.read_text(), 30)
        yield str(proxied), log
    finally:
        proxy.terminate()
        proxy.wait(timeout=30)


@contextlib.contextmanager
def operator_process(kubeconfig: str, namespace: str, workdir: Path) -> Iterator[int]:
    import urllib.request

    from freeport import free_port

    liveness = f"http://127.0.0.1:{free_port()}/healthz"
    argv = [sys.executable, "-m", "kuberl_operator", "-n", namespace, "--metrics-host",
            "127.0.0.1", "--metrics-port", str(free_port()), "--liveness", liveness,
            "--leader-election-id", "none"]  # fmt: skip
    log = workdir / "operator.log"
    with log.open("w") as out:
        process = subprocess.Popen(argv, env={**os.environ, "KUBECONFIG": kubeconfig}, stdout=out,
                                   stderr=subprocess.STDOUT)  # fmt: skip

    def alive() -> bool:
        assert process.poll() is None, f"the operator exited; see {log}"
        with contextlib.suppress(OSError), urllib.request.urlopen(liveness, timeout=2):
            return True
        return False

    try:
        wait_for("operator liveness", alive, 120)
        yield process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()  # figures are taken; a slow shutdown must not lose them
        print(f"operator log: {log}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--threads", type=int, default=8, help="concurrent create calls")
    parser.add_argument("--kubeconfig", help="a running cluster's (default: start one)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for the run")
    parser.add_argument("--out", type=Path, help="also write the command and figures here")
    args = parser.parse_args(argv)
    import localcluster
    from kubernetes import config

    wall = time.monotonic()
    with contextlib.ExitStack() as stack:
        workdir = Path(tempfile.mkdtemp(prefix="kuberl-bench-"))  # logs kept: printed at the end
        if args.kubeconfig:
            kubeconfig, state = (
                args.kubeconfig,
                localcluster.load_state(Path(args.kubeconfig).parent),
            )
        else:
            state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kuberl-")))
            state = localcluster.up(state_dir)
            stack.callback(localcluster.down, state_dir)
            kubeconfig = state.kubeconfig
        kuberay_pid = state.pids().get("ray-operator") if state else None
        assert kuberay_pid, "KubeRay's operator process is needed for the peer figures"
        kube_api = config.new_client_from_config(config_file=kubeconfig)
        kubectl = str(localcluster.require_binaries().kubectl)
        crd = ROOT / "crds" / "rltrainingjobs.kuberl.io.yaml"
        apply = [kubectl, f"--kubeconfig={kubeconfig}", "apply", "--server-side",
                 "--force-conflicts", "-f", str(crd)]  # fmt: skip
        subprocess.run(apply, check=True, capture_output=True)
        wait_for("the RLTrainingJob CRD Established", lambda: crd_established(kube_api), 60)
        ours = stack.enter_context(namespace(kube_api, "kuberl"))
        proxied, proxy_log = stack.enter_context(counting_proxy(kubectl, kubeconfig, workdir))
        operator_pid = stack.enter_context(operator_process(proxied, ours, workdir))
        before = count_requests(proxy_log)
        kuberl, kuberay = run(kube_api, ours, args.n, Process(operator_pid), Process(kuberay_pid),
                              args.threads, args.timeout,
                              requests=lambda: count_requests(proxy_log) - before)  # fmt: skip
        text = report(kuberl, kuberay, args.n)
        print(text)
        took = time.monotonic() - wall
        print(f"bench took {took:.0f}s")
        if args.out:
            command = " ".join(["python bench/operator_scale.py", *(argv or sys.argv[1:])])
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            load = os.getloadavg()[0]
            args.out.write_text(f"$ {command}\n# {when}, {os.cpu_count()} CPUs, load {load:.1f}, "
                                f"bench took {took:.0f}s\n{text}\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
