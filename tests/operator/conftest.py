"""In-memory stand-ins for the Kubernetes API and a Ray head, and a harness driving reconcile."""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from freeport import free_port

from kuberl_operator.config import OperatorConfig
from kuberl_operator.metrics import Metrics
from kuberl_operator.ray_jobs import DashboardUnavailable, JobInfo
from kuberl_operator.reconcile import Reconciler
from support.manifests import valid_manifest, with_changes

NAMESPACE = "team-a"
UID = "0b6f1c2e-uid"


class FakeKube:
    """Just enough of kube.Kube: jobs, RayClusters, pods and created objects, in dicts."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.rayclusters: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, list[dict[str, Any]]] = {}
        self.created: list[tuple[str, str]] = []
        self.objects: list[dict[str, Any]] = []  # every object created, as sent
        self.deleted: list[tuple[str, str]] = []
        self.status_patches: list[dict[str, Any]] = []
        self.fail_next_patch = False
        self.refuse: dict[str, Exception] = {}  # kind -> what the API server answers a create

    def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.jobs.get(name))

    def patch_job_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        if self.fail_next_patch:
            self.fail_next_patch = False
            raise RuntimeError("operator killed before writing status")
        self.status_patches.append(patch)
        status = self.jobs[name].setdefault("status", {})
        for key, value in patch.items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = copy.deepcopy(value)

    def delete_job(self, namespace: str, name: str) -> None:
        self.deleted.append(("RLTrainingJob", name))
        self.jobs.pop(name, None)

    def get_raycluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.rayclusters.get(name))

    def list_rayclusters(self, namespace: str, job: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(rc) for rc in self.rayclusters.values()]

    def delete_raycluster(self, namespace: str, name: str) -> None:
        if self.rayclusters.pop(name, None) is not None:
            self.deleted.append(("RayCluster", name))

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        return self.pods.get(selector.split("=", 1)[1], [])

    def create(self, obj: dict[str, Any]) -> bool:
        key = (obj["kind"], obj["metadata"]["name"])
        if obj["kind"] in self.refuse:
            raise self.refuse[obj["kind"]]
        if key in self.created:
            return False
        self.created.append(key)
        self.objects.append(copy.deepcopy(obj))
        if obj["kind"] == "RayCluster":
            self.rayclusters[obj["metadata"]["name"]] = copy.deepcopy(obj)
        return True


class FakeRay:
    """A Ray head's job table, shared by every dashboard URL."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.submissions: list[dict[str, Any]] = []
        self.stopped: list[str] = []
        self.session = "session_1"
        self.reachable = True
        self.locked = True  # refuses a request without the token, as token auth does
        self.tokens: set[str] = set()

    def client(self, url: str, token: str) -> FakeRay:
        self.tokens.add(token)
        return self

    def _check(self) -> None:
        if not self.reachable:
            raise DashboardUnavailable("connection refused")

    def session_name(self) -> str:
        self._check()
        return self.session

    def refuses_anonymous(self) -> bool:
        self._check()
        return self.locked

    def submit(self, payload: dict[str, Any]) -> str:
        self._check()
        sid = payload["submission_id"]
        if sid not in self.jobs:
            self.submissions.append(payload)
            self.jobs[sid] = {"status": "PENDING", "metadata": payload["metadata"], "logs": ""}
        return sid

    def get(self, sid: str) -> JobInfo | None:
        self._check()
        job = self.jobs.get(sid)
        if job is None:
            return None
        return JobInfo.from_api({"submission_id": sid, **job})

    def stop(self, sid: str) -> bool:
        self._check()
        self.stopped.append(sid)
        if sid in self.jobs:
            self.jobs[sid]["status"] = "STOPPED"
        return True

    def logs_tail(self, sid: str, max_chars: int = 2000) -> str:
        return self.jobs.get(sid, {}).get("logs", "")

    def finish(self, sid: str, status: str, exit_code: int | None = None, logs: str = "") -> None:
        self.jobs[sid].update(status=status, driver_exit_code=exit_code, logs=logs)


class Harness:
    def __init__(self, manifest: dict[str, Any], config: OperatorConfig) -> None:
        self.kube = FakeKube()
        self.ray = FakeRay()
        self.now = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
        self.config = config
        self.events: list[Any] = []
        self.name = manifest["metadata"]["name"]
        body = copy.deepcopy(manifest)
        body["metadata"].update(namespace=NAMESPACE, uid=UID, generation=1)
        self.kube.jobs[self.name] = body
        self.reconciler = self.new_reconciler()

    def new_reconciler(self) -> Reconciler:
        """A freshly started operator: no memory but what the API holds."""
        return Reconciler(
            self.kube,
            self.config,
            Metrics(),
            emit=lambda body, event: self.events.append(event),
            ray_client=self.ray.client,
            clock=lambda: self.now,
        )

    def reconcile(self) -> dict[str, Any]:
        self.reconciler.reconcile(NAMESPACE, self.name)
        return self.status

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @property
    def job(self) -> dict[str, Any]:
        return self.kube.jobs[self.name]

    @property
    def status(self) -> dict[str, Any]:
        return self.kube.jobs.get(self.name, {}).get("status", {})

    def condition(self, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.status.get("conditions", []) if c["type"] == type_), None)

    def set_spec(self, changes: dict[str, Any]) -> None:
        self.kube.jobs[self.name] = with_changes(self.job, changes)
        self.job["metadata"]["generation"] += 1

    def make_cluster_ready(self) -> None:
        for rc in self.kube.rayclusters.values():
            rc["status"] = {
                "state": "ready",
                "readyWorkerReplicas": 1,
                "desiredWorkerReplicas": 1,
                "conditions": [
                    {"type": "HeadPodReady", "status": "True"},
                    {"type": "RayClusterProvisioned", "status": "True"},
                ],
            }

    def report_progress(self, step: int, checkpoint: int | None = None) -> None:
        """What the runtime's reporter patches into status."""
        status = self.job.setdefault("status", {})
        status["progress"] = {
            "globalStep": step,
            "totalSteps": 10,
            "lastUpdateTime": self.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if checkpoint is not None:
            status["checkpoint"] = {"latestStep": checkpoint, "latestPath": f"/ck/{checkpoint}"}

    def run_until_running(self) -> str:
        """Reconcile a fresh attempt to a RUNNING Ray job; return its submission id."""
        self.reconcile()
        self.make_cluster_ready()
        self.reconcile()
        sid = self.status["rayJob"]["submissionId"]
        self.ray.jobs[sid]["status"] = "RUNNING"
        self.reconcile()
        return sid


@pytest.fixture
def config() -> OperatorConfig:
    return OperatorConfig(backoff_base=10, backoff_max=60, dashboard_grace_seconds=30)


@pytest.fixture
def manifest() -> dict[str, Any]:
    return with_changes(valid_manifest(), {"metadata.name": "grpo"})


@pytest.fixture
def harness(manifest: dict[str, Any], config: OperatorConfig) -> Harness:
    return Harness(manifest, config)


# --- cluster tier: the real control plane, a local Ray head, the operator as a process -------

REPO = Path(__file__).resolve().parents[2]
CRD_FILE = REPO / "crds" / "rltrainingjobs.kuberl.io.yaml"


def wait_for(what: str, predicate: Any, timeout: float = 60, interval: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def token_kubeconfig(local_cluster: Any, kube_api: Any, tmp_path: Path) -> Any:
    """A kubeconfig path authenticating as a ServiceAccount (a fresh bound token)."""

    def make(namespace: str, account: str) -> str:
        path = tmp_path / f"{namespace}-{account}.kubeconfig"
        token = service_account_token(kube_api, namespace, account)
        write_token_kubeconfig(local_cluster.kubeconfig, token, path)
        return str(path)

    return make


@pytest.fixture(scope="session")
def kubectl_bin(local_cluster: Any) -> str:
    from testcluster.binaries import resolve_binaries  # on sys.path once localcluster loaded

    return str(resolve_binaries().kubectl)


@pytest.fixture(scope="session")
def kuberl_crd(local_cluster: Any, kube_api: Any, kubectl_bin: str) -> None:
    from support.rljobs import crd_established

    base = [kubectl_bin, f"--kubeconfig={local_cluster.kubeconfig}"]
    subprocess.run(
        [*base, "apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE)], check=True
    )
    wait_for("the RLTrainingJob CRD Established", lambda: crd_established(kube_api))


@pytest.fixture(scope="session")
def operator_kubeconfig(
    local_cluster: Any, kuberl_crd: None, tmp_path_factory: Any
) -> Iterator[str]:
    """The chart's ServiceAccount token: the operator runs with exactly what `helm install`
    grants, so every lifecycle test also proves the chart's RBAC is sufficient."""
    from support.helm import chart_operator_kubeconfig

    home = tmp_path_factory.mktemp("helm")
    with chart_operator_kubeconfig(local_cluster.kubeconfig, home) as path:
        yield path


def service_account_token(kube_api: Any, namespace: str, name: str) -> str:
    from kubernetes import client

    request = {"spec": {"audiences": [], "expirationSeconds": 3600}}
    response = client.CoreV1Api(kube_api).create_namespaced_service_account_token(
        name, namespace, request
    )
    return response.status.token


def write_token_kubeconfig(admin_kubeconfig: str, token: str, path: Path) -> None:
    config = yaml.safe_load(Path(admin_kubeconfig).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(yaml.safe_dump(config))


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    """A real Ray head on 127.0.0.1 whose PATH starts with the fake `kuberl` (fake_kuberl.py);
    any other experiment falls through to the real `kuberl train` (the e2e tier)."""
    from localray import start_head  # hack/ is on pytest's pythonpath

    from kuberl_operator.ray_jobs import RayJobsClient

    shim = tmp_path_factory.mktemp("shim")
    kuberl = shim / "kuberl"
    kuberl.write_text(
        f'#!/bin/sh\nexec {sys.executable} {Path(__file__).parent / "fake_kuberl.py"} "$@"\n'
    )
    kuberl.chmod(0o755)
    # Offline, and one thread per training process: the machine's cores are shared.
    # Token auth, as on every RayCluster: the operator's token path is exercised for real.
    head = start_head(
        shim, [shim], env={"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}, token_auth=True
    )
    assert head.token is not None
    token_file = shim / "ray-token"
    token_file.write_text(head.token)
    client = RayJobsClient(head.url, timeout=2, token=head.token)
    try:
        yield {"url": head.url, "client": client, "log": head.log, "token_file": str(token_file)}
    finally:
        head.stop()


class OperatorProcess:
    """`python -m kuberl_operator` watching one namespace; killable and restartable."""

    def __init__(self, kubeconfig: str, namespace: str, dashboard: str, runtime_kubeconfig: str,
                 log_path: Path, token_file: str,
                 leader_election: Sequence[str] = ("--leader-election-id", "none"),
                 ) -> None:  # fmt: skip
        self.metrics_port, self.liveness_port = free_port(), free_port()
        self.argv = [
            sys.executable, "-m", "kuberl_operator", "-n", namespace,
            "--poll-interval", "1", "--backoff-base", "1", "--backoff-max", "4",
            "--dashboard-url-override", dashboard, "--runtime-kubeconfig", runtime_kubeconfig,
            "--dashboard-token-file", token_file,
            "--dashboard-grace-seconds", "120", "--metrics-host", "127.0.0.1",
            "--metrics-port", str(self.metrics_port),
            "--liveness", f"http://127.0.0.1:{self.liveness_port}/healthz",
            # Off unless asked: each test's operator watches its own namespace
            # (test_leader_election_cluster.py runs two with the chart's Lease).
            *leader_election,
        ]  # fmt: skip
        self.env = {**os.environ, "KUBECONFIG": kubeconfig}
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.log_path, "a")  # noqa: SIM115 - closed with the process
        self.process = subprocess.Popen(
            self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def get(self, path: str) -> str:
        url = f"http://127.0.0.1:{self.metrics_port if path == '/metrics' else self.liveness_port}"
        with urllib.request.urlopen(url + path, timeout=5) as response:
            return response.read().decode()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextlib.contextmanager
def fresh_namespace(kube_api: Any) -> Iterator[str]:
    from kubernetes import client

    name = f"op-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(kube_api)
    core.create_namespace({"metadata": {"name": name}})
    wait_for(
        f"ServiceAccount {name}/default",
        lambda: any(sa.metadata.name == "default"
                    for sa in core.list_namespaced_service_account(name).items),
    )  # fmt: skip
    try:
        yield name
    finally:
        core.delete_namespace(name)


@contextlib.contextmanager
def running_operator(
    kubeconfig: str, namespace: str, ray_head: dict[str, Any], runtime_kubeconfig: str,
    log_path: Path,
) -> Iterator[OperatorProcess]:  # fmt: skip
    process = OperatorProcess(
        kubeconfig, namespace, ray_head["url"], runtime_kubeconfig, log_path,
        ray_head["token_file"],
    )  # fmt: skip
    process.start()
    try:
        wait_for("operator liveness", lambda: _alive(process), timeout=60)
        yield process
    finally:
        process.stop()
        print("----- operator log (shown when the test fails) -----\n" + process.output()[-8000:])


@pytest.fixture
def job_namespace(kube_api: Any, kuberl_crd: None) -> Iterator[str]:
    with fresh_namespace(kube_api) as name:
        yield name


@pytest.fixture
def operator_process(
    local_cluster: Any,
    operator_kubeconfig: str,
    job_namespace: str,
    ray_head: dict[str, Any],
    tmp_path: Path,
) -> Iterator[OperatorProcess]:
    with running_operator(
        operator_kubeconfig, job_namespace, ray_head, local_cluster.kubeconfig,
        tmp_path / "operator.log",
    ) as process:  # fmt: skip
        yield process


@pytest.fixture(scope="module")
def module_operator(
    local_cluster: Any,
    kube_api: Any,
    kuberl_crd: None,
    operator_kubeconfig: str,
    ray_head: dict[str, Any],
    tmp_path_factory: Any,
) -> Iterator[tuple[str, OperatorProcess]]:
    """One namespace and one operator shared by a module's tests (the e2e runs build on each
    other's results: an interrupted run is compared with the uninterrupted one)."""
    log_path = tmp_path_factory.mktemp("operator") / "operator.log"
    with fresh_namespace(kube_api) as namespace, running_operator(
        operator_kubeconfig, namespace, ray_head, local_cluster.kubeconfig, log_path
    ) as process:  # fmt: skip
        yield namespace, process


@pytest.fixture(scope="module")
def module_jobs(kube_api: Any, module_operator: tuple[str, OperatorProcess]) -> Any:
    """The RLTrainingJobs of `module_operator`'s namespace (the e2e modules' real training)."""
    from support.rljobs import Jobs

    namespace, _ = module_operator
    return Jobs(kube_api, namespace)


def _alive(process: OperatorProcess) -> bool:
    assert process.process is not None and process.process.poll() is None, process.output()
    try:
        return bool(process.get("/healthz"))
    except OSError:
        return False


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: Any) -> Path:
    """The demo's tiny Qwen2 (what examples/make_tiny_model.py writes), in a temp dir."""
    from transformers import AutoTokenizer

    from kuberl_runtime.testing.tiny import save_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(REPO / "examples" / "tokenizer" / "arith-tokenizer")
    out = tmp_path_factory.mktemp("models") / "tiny-qwen2"
    save_tiny_model(out, tokenizer, seed=0)
    return out


@pytest.fixture
def jobs(kube_api: Any, job_namespace: str, operator_process: Any) -> Any:
    from support.rljobs import Jobs

    return Jobs(kube_api, job_namespace)


# --- cluster tier with a fake Jobs API: tests about Kubernetes decide when each Ray job ends ---


@pytest.fixture
def dashboard() -> Iterator[Any]:
    """support/fake_dashboard.py's Jobs API on 127.0.0.1 (every head's URL for the operator)."""
    from support.fake_dashboard import FakeDashboard

    fake = FakeDashboard()
    yield fake
    fake.close()


@pytest.fixture
def dashboard_jobs(
    kube_api: Any, local_cluster: Any, job_namespace: str, dashboard: Any, tmp_path: Path
) -> Iterator[Any]:
    """The RLTrainingJobs of a fresh namespace watched by an operator process (admin
    credentials) whose Ray heads are all `dashboard`."""
    from support.fake_dashboard import operator_on
    from support.rljobs import Jobs

    with operator_on(local_cluster.kubeconfig, job_namespace, dashboard, tmp_path / "op.log"):
        yield Jobs(kube_api, job_namespace)
