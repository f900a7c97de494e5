"""`make demo`: kuberl end to end on this machine, every component the real one.

    python hack/demo.py                  # up, install, train, show, tear down
    python hack/demo.py --real-node off  # the GRPO job on kwok pods + a Ray head on the host
    KEEP=1 python hack/demo.py           # leave everything running (`--down` ends it)

1. the control-plane binaries (hack/cluster-bin.sh builds them once, then reuses the cache);
2. a local control plane: etcd, kube-apiserver, controller-manager, scheduler, kwok node pools and
   the KubeRay operator (hack/localcluster.py);
3. where the GRPO job's pods run: when the machine can (root, overlayfs, cgroups:
   realnode.unsupported_reason() is None), a real kubelet + containerd node beside the kwok pools
   running the runtime-cpu image built from images/ (hack/demo_realpods.py); otherwise it says
   why, and a Ray head on 127.0.0.1 stands in for the RayCluster's dashboard (kwok pods are fakes);
4. `helm install` of charts/kuberl, watching the demo namespace;
5. `kuberl operator` as a local process holding the chart ServiceAccount's token (the chart's
   Deployment pod runs on a kwok node, where nothing really runs);
6. a model that learns (kuberl_runtime.demo_learning): the shared storage is written (tiny random
   Qwen2, data), then that model is scored beside its SFT warm start, `kuberl train
   examples/demo-sft.yaml` on this host. All local CPU work that needs nothing from the cluster,
   so it runs in a background thread while steps 1-5 bring the cluster up (those mostly wait on
   processes); the GRPO stage starts once both are done;
7. the GRPO stage as an RLTrainingJob: examples/demo-job.yaml's spec with examples/demo-grpo.yaml
   as its backend_config, starting from the SFT export; its status live until it ends, the pod
   a rank runs in (real pods), a line scraped from the runtime's /metrics while it trains, then
   accuracy before and after each stage.

Why SFT is not an RLTrainingJob here (spec.sft_config, with the GRPO job naming it in
spec.dependsOn, as examples/sft-chain.yaml does): the operator creates a job's RayCluster only
once its dependencies have Succeeded, so the chain pays a second RayCluster start (about 40 s
to Ready pods and a submitted driver, then about 30 s of runtime start and validation inside
the pod, measured at load 7-10), and SFT could no longer overlap the cluster's bring-up: over
the 3-minute budget on 2 shared cores. examples/sft-chain.yaml and
tests/operator/test_chaining_cluster.py show that path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The storage is written in a background thread: no progress bars inside the cluster's output.
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
sys.path[:0] = [str(ROOT / "hack"), str(ROOT / "tests")]  # localcluster/localray, support.helm

import localcluster  # noqa: E402
import realnode  # noqa: E402
import yaml  # noqa: E402
from demo_realpods import RealPods  # noqa: E402
from localray import free_port, start_head  # noqa: E402

from kuberl_runtime import demo_learning as learning  # noqa: E402
from support.crds import wait_established  # noqa: E402
from support.helm import resolve_helm, token_kubeconfig  # noqa: E402

DEMO_DIR = Path("/tmp/kuberl-demo")  # the paths in examples/demo-job.yaml
JOB_FILE = ROOT / "examples" / "demo-job.yaml"
# The GRPO stage's manifest, as applied: JOB_FILE's spec with the learning demo's backend_config.
APPLIED_JOB = DEMO_DIR / "grpo-job.yaml"
APPLIED_VOLUMES = DEMO_DIR / "grpo-volumes.yaml"  # real pods: applied and bound before the job
JOB, NAMESPACE, CHART_NAMESPACE, RELEASE = "demo", "kuberl-demo", "kuberl-system", "kuberl"
TIMEOUT = 900


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


class Demo:
    def __init__(self, demo_dir: Path, real_node: str = "auto") -> None:
        self.dir = demo_dir
        self.real_node = real_node  # auto | on | off
        self.pods: RealPods | None = None  # the GRPO job runs in real pods when set
        self.sft_model = demo_dir / "sft" / "huggingface"
        self.cluster_dir = demo_dir / "cluster"
        self.started = time.monotonic()
        self.operator: subprocess.Popen | None = None
        self.head: Any = None
        self.kubeconfig = ""
        self.metrics_url = ""
        self.runtime_metrics_url = ""
        self.runtime_sample = ""
        self.data: dict[str, Path] = {}
        self.storage_reused = False
        self.accuracy: dict[str, float] = {}
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = time.monotonic() - started

    # --- setup -----------------------------------------------------------------------------

    def warm_start(self) -> list[float]:
        """The shared storage (tiny random Qwen2, data, empty outputs), then the random model
        scored beside SFT: local CPU work that needs nothing from the cluster, run while it comes
        up, printing nothing until `show_warm_start`. SFT's losses."""
        with self.stage("storage"):
            for stale in ("outputs", "base", "sft"):
                shutil.rmtree(self.dir / stale, ignore_errors=True)
            self.data, self.storage_reused = learning.prepare_cached(self.dir)
        with self.stage("score + SFT"):
            before, losses = learning.warm_start(self.dir, self.data)
        self.accuracy["before SFT"] = before
        return losses

    def show_warm_start(self, losses: list[float]) -> None:
        made = "kept: its inputs are unchanged" if self.storage_reused else "written"
        say(f"warm start, run beside the cluster's bring-up: shared storage {self.dir} (tiny "
            f"random Qwen2 and arithmetic data {made}; empty outputs) in "
            f"{self.seconds['storage']:.0f}s, the random model scored ({self.dir / 'base.log'}) "
            f"beside SFT with kuberl train examples/demo-sft.yaml "
            f"({self.dir / 'sft.log'})")  # fmt: skip
        print(f"validation accuracy before SFT: {self.accuracy['before SFT']:.2f}")
        print(f"SFT loss {losses[0]:.2f} -> {losses[-1]:.2f} in {len(losses)} steps, "
              f"{self.seconds['score + SFT']:.0f}s; model {self.sft_model}")  # fmt: skip

    def start_cluster(self) -> Any:
        say("control-plane binaries (built once, then cached)")
        run(["bash", str(ROOT / "hack" / "cluster-bin.sh")])
        say("control plane: etcd, kube-apiserver, scheduler, controller-manager, kwok, KubeRay")
        state = localcluster.up(self.cluster_dir)
        self.kubeconfig = state.kubeconfig
        print(f"API server {state.server}; kubeconfig {state.kubeconfig}")
        return state

    def place_job(self, state: Any) -> None:
        """Real pods when this machine can run the real node; else kwok pods + a host Ray head."""
        reason = ("--real-node off" if self.real_node == "off"
                  else realnode.unsupported_reason() or realnode.store_in_use_reason())  # fmt: skip
        if reason is None:
            say("the real node: kubelet + containerd beside the kwok pools, for the job's pods")
            self.pods = RealPods(self.dir, self.kubectl)
            self.pods.start(state)
        elif self.real_node == "on":
            raise RuntimeError(f"--real-node on, but {reason}")
        else:
            say(f"no real node ({reason}): the GRPO job's Ray pods will be kwok fakes, "
                "and a Ray head on the host runs the job")  # fmt: skip
        print(self.kubectl("get", "nodes", "-L", "kuberl.io/pool"))

    def install_chart(self) -> str:
        say(f"helm install {RELEASE} charts/kuberl (watching namespace {NAMESPACE})")
        for namespace in (CHART_NAMESPACE, NAMESPACE):
            if self.kubectl("get", "namespace", namespace, check=False) == "":
                self.kubectl("create", "namespace", namespace)
        helm = resolve_helm(self._home("helm"), self.kubeconfig)
        if RELEASE not in helm.run("list", f"--namespace={CHART_NAMESPACE}", "-q").stdout.split():
            values = {"operator": {"watchNamespaces": [NAMESPACE]}}
            print(helm.install(RELEASE, CHART_NAMESPACE, values).strip().splitlines()[0])
        wait_established(self.kubectl, ["rltrainingjobs.kuberl.io"], timeout=60)
        path = self._home("creds") / "operator.kubeconfig"
        return token_kubeconfig(self.kubeconfig, RELEASE, CHART_NAMESPACE, path)

    def start_ray(self) -> None:
        say("a Ray head on 127.0.0.1, standing in for the RayCluster's dashboard")
        # The runtime's /metrics (rank 0) on a free loopback port: in a RayCluster the operator
        # sets these on the pods; here the head's processes stand in for them.
        port = free_port()
        self.runtime_metrics_url = f"http://127.0.0.1:{port}/metrics"
        env = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
               "KUBERL_METRICS_PORT": str(port), "KUBERL_METRICS_ADDR": "127.0.0.1"}  # fmt: skip
        self.head = start_head(self.dir / "logs", env=env)
        print(f"Ray dashboard {self.head.url}")

    def start_operator(self, operator_kubeconfig: str) -> None:
        say("kuberl operator (a local process with the chart ServiceAccount's token)")
        metrics, liveness = free_port(), free_port()
        self.metrics_url = f"http://127.0.0.1:{metrics}/metrics"
        log = self.dir / "logs" / "operator.log"
        argv = [
            str(Path(sys.executable).parent / "kuberl"), "operator", "-n", NAMESPACE,
            "--poll-interval", "2",
            "--metrics-host", "127.0.0.1", "--metrics-port", str(metrics),
            "--liveness", f"http://127.0.0.1:{liveness}/healthz",
            # the Lease where the chart's leader-election Role grants it (in a pod: its namespace)
            "--leader-election-namespace", CHART_NAMESPACE,
        ]  # fmt: skip
        # In real pods the operator finds each head from its pods (host IP, allocated port) and
        # the runtime reports with the token mounted in its pod.
        if self.pods is None:
            # kwok pods run nothing: the host's Ray head stands in for the job's, and outside a
            # pod the runtime has no mounted token; the admin kubeconfig stands in for it.
            argv += ["--dashboard-url-override", self.head.url,
                     "--runtime-kubeconfig", self.kubeconfig]  # fmt: skip
        else:
            argv.append("--allow-host-network")  # the real node has no pod CNI: hostNetwork jobs
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as out:
            env = {**os.environ, "KUBECONFIG": operator_kubeconfig}
            self.operator = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        wait(lambda: http_ok(f"http://127.0.0.1:{liveness}/healthz"), 60, "operator liveness",
             self.operator)  # fmt: skip
        print(f"operator log {log}; metrics {self.metrics_url}")

    # --- the job ---------------------------------------------------------------------------

    def grpo_manifests(self) -> list[dict[str, Any]]:
        """The GRPO stage: JOB_FILE's spec with the learning demo's backend_config from the SFT
        export; in real pods, on the real node, after the volumes it mounts."""
        data, model = self.data, self.sft_model
        if self.pods is not None:
            data, model = self.pods.stage_inputs(data, model)
        config = learning.grpo_job(data, model, "checkpoints")
        config["trainer"]["save_freq"] = 15  # a checkpoint to resume from, as cluster jobs keep
        manifest = yaml.safe_load(JOB_FILE.read_text())
        manifest["spec"]["backend_config"] = config
        return self.pods.job(manifest) if self.pods is not None else [manifest]

    def apply_volumes(self, volumes: list[dict[str, Any]]) -> None:
        """The job's PersistentVolumes and claims, Bound before the job's pods ask for them: a
        pod that finds an unbound claim is unschedulable until the scheduler's backoff retries
        it (15-16 s later, measured)."""
        APPLIED_VOLUMES.write_text(yaml.safe_dump_all(volumes, sort_keys=False))
        say(f"the job's volumes: kubectl apply -f {APPLIED_VOLUMES}, then wait until Bound")
        print(self.kubectl("apply", "-f", str(APPLIED_VOLUMES)).strip())
        for claim in (v["metadata"] for v in volumes if v["kind"] == "PersistentVolumeClaim"):
            self.kubectl("wait", f"pvc/{claim['name']}", "-n", claim["namespace"],
                         "--for=jsonpath={.status.phase}=Bound", "--timeout=120s")  # fmt: skip

    def run_job(self) -> dict[str, Any]:
        manifests = json.loads(json.dumps(self.grpo_manifests()))  # no YAML anchors in the file
        volumes = [m for m in manifests if m["kind"] != "RLTrainingJob"]  # real pods only
        job = [m for m in manifests if m["kind"] == "RLTrainingJob"]
        APPLIED_JOB.write_text(yaml.safe_dump_all(job, sort_keys=False))
        if volumes:
            self.apply_volumes(volumes)
        say(f"GRPO from the SFT model: kubectl apply -f {APPLIED_JOB}")
        print(f"({JOB_FILE.relative_to(ROOT)} with examples/demo-grpo.yaml as backend_config"
              + ("; in real pods: the runtime-cpu image, hostNetwork, a head and one worker on "
                 "the real node, inputs and outputs on host-backed volumes)"
                 if self.pods else ")"))  # fmt: skip
        self.kubectl("delete", "rlj", JOB, "-n", NAMESPACE, "--ignore-not-found", "--wait")
        print(self.kubectl("apply", "-f", str(APPLIED_JOB)).strip())
        say("live status (phase, step, reward, ETA), one line per change")
        last, deadline = "", time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            status = json.loads(self.kubectl("get", "rlj", JOB, "-n", NAMESPACE, "-o", "json"))
            status = status.get("status") or {}
            line = progress_line(status)
            if line != last:
                print(f"[{time.monotonic() - self.started:5.0f}s] {line}", flush=True)
                last = line
            if self.pods is not None:
                self.pods.observe(NAMESPACE, JOB)
                self.runtime_metrics_url = self.pods.metrics_url()
            self.runtime_sample = (
                runtime_metric_line(self.runtime_metrics_url) or self.runtime_sample
            )
            if status.get("phase") in ("Succeeded", "Failed"):
                return status
            assert self.operator is not None and self.operator.poll() is None, "operator exited"
            time.sleep(1)
        raise TimeoutError(f"the job did not finish within {TIMEOUT}s")

    def report(self, status: dict[str, Any]) -> None:
        print()
        print(self.kubectl("get", "rlj", "-n", NAMESPACE, "-o", "wide").rstrip())
        if status.get("phase") != "Succeeded":
            print(f"\nthe job failed: {status.get('message')}")
            return
        outputs = self.dir / "outputs"
        after_sft, after_grpo, rewards = learning.grpo_outcome(learning.read_metrics(outputs))
        self.accuracy.update({"after SFT": after_sft, "after GRPO": after_grpo})
        say("what the model learned (validation accuracy, exact answers)")
        for stage, value in self.accuracy.items():
            print(f"{stage:<12} {value:.2f}")
        first, final = rewards[:5], rewards[-5:]
        print(f"GRPO training reward: first 5 steps {sum(first) / len(first):.2f} -> "
              f"last 5 steps {sum(final) / len(final):.2f}")  # fmt: skip
        checkpoints = sorted(p.name for p in (outputs / "checkpoints").glob("global_step_*"))
        say("where things are")
        print(f"SFT model       {self.dir / 'sft' / 'huggingface'}")
        print(f"curves          {outputs / 'logs' / 'curves.png'}, "
              f"{self.dir / 'sft' / 'logs' / 'curves.png'}")  # fmt: skip
        print(f"checkpoints     {outputs / 'checkpoints'}  ({', '.join(checkpoints)})")
        print(f"exported model  {outputs / 'huggingface'}")
        print(f"metrics         {outputs / 'logs' / 'metrics.jsonl'}; "
              f"tensorboard --logdir {outputs / 'logs' / 'tensorboard'}")  # fmt: skip
        print(f"attempt plans   {outputs / '.kuberl'}")
        if self.pods is not None:
            self.pods.report(outputs)
        print(f"runtime         {self.runtime_metrics_url} (rank 0, while it trains)")
        print(f"                {self.runtime_sample or '(not scraped: the run ended first)'}")
        print(f"operator        curl {self.metrics_url}")
        for line in fetch(self.metrics_url).splitlines():
            if line.startswith(("kuberl_job_global_step{", "kuberl_jobs{")) and "demo" in line:
                print(f"                {line}")
        left = self.kubectl("get", "rayclusters", "-n", NAMESPACE, "-o", "name").strip()
        print(f"RayClusters     {left or 'none left (deleted on success)'}")

    # --- teardown --------------------------------------------------------------------------

    def tear_down(self) -> None:
        """The operator first (it acts on the cluster), then the Ray head beside the cluster."""
        if self.operator is not None and self.operator.poll() is None:
            self.operator.terminate()
            self.operator.wait(timeout=30)
        with ThreadPoolExecutor(max_workers=1) as pool:
            head = pool.submit(self.head.stop) if self.head is not None else None
            localcluster.down(self.cluster_dir)
            if head is not None:
                head.result()

    def record_processes(self) -> None:
        """For `--down` after KEEP=1: the operator's pid and the Ray head's process group."""
        pids = {"operator": self.operator.pid if self.operator else None,
                "ray_head_group": self.head.process.pid if self.head else None}  # fmt: skip
        (self.dir / "pids.json").write_text(json.dumps(pids))

    def kubectl(self, *args: str, check: bool = True) -> str:
        kubectl = localcluster.require_binaries().kubectl
        argv = [str(kubectl), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout if result.returncode == 0 else ""

    def _home(self, name: str) -> Path:
        path = self.dir / name
        path.mkdir(parents=True, exist_ok=True)
        return path


def stop_kept(demo_dir: Path) -> None:
    path = demo_dir / "pids.json"
    if path.exists():
        pids = json.loads(path.read_text())
        for pid, kill in ((pids["operator"], os.kill), (pids["ray_head_group"], os.killpg)):
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    kill(pid, signal.SIGTERM)
        path.unlink()
    localcluster.down(demo_dir / "cluster")


def progress_line(status: dict[str, Any]) -> str:
    progress = status.get("progress") or {}
    parts = [f"{status.get('phase', 'Pending'):<12}"]
    if "globalStep" in progress:
        parts.append(f"step {progress['globalStep']}/{progress.get('totalSteps', '?')}")
    reward = (progress.get("metrics") or {}).get("critic/score/mean")
    if reward is not None:
        parts.append(f"reward {reward:.3f}")
    if progress.get("estimatedRemainingSeconds") is not None:
        parts.append(f"ETA {progress['estimatedRemainingSeconds']}s")
    step = (status.get("checkpoint") or {}).get("latestStep")
    if step is not None:
        parts.append(f"checkpoint {step}")
    if not progress and status.get("message"):
        parts.append(status["message"])
    return "  ".join(parts)


def runtime_metric_line(url: str) -> str:
    """One sample of the runtime's own gauges (empty until rank 0 serves them)."""
    if not url:
        return ""
    try:
        text = fetch(url)
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.startswith("kuberl_runtime_")]
    return next((line for line in lines if "score_mean" in line), lines[0] if lines else "")


def run(argv: list[str]) -> None:
    subprocess.run(argv, check=True)


def http_ok(url: str) -> bool:
    try:
        return bool(fetch(url))
    except OSError:
        return False


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read().decode()


def wait(predicate: Any, timeout: float, what: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not up (exit code {process.poll()})")
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep",
        action="store_true",
        default=bool(os.environ.get("KEEP")),
        help="leave the cluster, operator and Ray head running (env KEEP=1)",
    )
    parser.add_argument("--down", action="store_true", help="stop a demo kept with KEEP=1")
    parser.add_argument(
        "--real-node",
        choices=("auto", "on", "off"),
        default="auto",
        help="the GRPO job in real pods: auto (when the machine can, saying why not), on, off",
    )
    args = parser.parse_args(argv)  # fmt: skip
    demo = Demo(DEMO_DIR, args.real_node)
    if args.down:
        stop_kept(DEMO_DIR)
        return 0
    ok = False
    try:
        # Storage, score + SFT are CPU work on this host and need nothing from the cluster; the
        # cluster's bring-up mostly waits on processes: both at once, then the GRPO stage.
        with ThreadPoolExecutor(max_workers=1) as background:
            say("in the background: the demo's storage, then the random model scored beside SFT "
                "(results below)")  # fmt: skip
            warm_start = background.submit(demo.warm_start)
            with demo.stage("control plane"):
                state = demo.start_cluster()
            with demo.stage("real node" if demo.real_node != "off" else "placement"):
                demo.place_job(state)
            with demo.stage("chart"):
                operator_kubeconfig = demo.install_chart()
            with demo.stage("operator"):
                if demo.pods is None:
                    demo.start_ray()
                demo.start_operator(operator_kubeconfig)
            with demo.stage("wait for SFT"):
                losses = warm_start.result()
        demo.show_warm_start(losses)
        with demo.stage("GRPO job"):
            status = demo.run_job()
        demo.report(status)
        ok = status.get("phase") == "Succeeded"
    finally:
        if args.keep:
            demo.record_processes()
            say(f"kept running (KEEP=1): KUBECONFIG={demo.kubeconfig} kubectl get rlj -A")
            print("stop cluster, operator and Ray head: `.venv/bin/python hack/demo.py --down`")
        else:
            say("tearing down")
            with demo.stage("teardown"):
                demo.tear_down()
        print(f"\ndemo {'succeeded' if ok else 'FAILED'} in {time.monotonic() - demo.started:.0f}s "
              f"({', '.join(f'{k} {v:.0f}s' for k, v in demo.seconds.items())})")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
