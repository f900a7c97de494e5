"""A real Kubernetes control plane on loopback for tests, `make cluster-up` and the demo.

    python hack/localcluster.py up     --dir .cluster   # start, wait until ready, write state.json
    python hack/localcluster.py status --dir .cluster   # which processes live, is the API ready
    python hack/localcluster.py logs   --dir .cluster   # tails of every component's log
    python hack/localcluster.py down   --dir .cluster   # stop exactly the recorded PIDs, clean up
    python hack/localcluster.py up --real-node on ...   # plus a real kubelet node (hack/realnode)

etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (fake nodes from
hack/nodepools.yaml) and the KubeRay operator, all bound to 127.0.0.1 on free ports. Binaries
come from `make cluster-bin`. Importable: tests call up()/down() with the same state directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path

# Run as a script, sys.path[0] is hack/ already; imported by path (tests/conftest.py), it is not,
# and the testcluster package beside this file must still resolve.
_HACK_DIR = str(Path(__file__).resolve().parent)
if _HACK_DIR not in sys.path:
    sys.path.insert(0, _HACK_DIR)

import realnode  # noqa: E402
from realnode.images import build_images  # noqa: E402
from realnode.node import RELAY_PREFIX  # noqa: E402
from testcluster import components as comp  # noqa: E402
from testcluster import kueue  # noqa: E402
from testcluster.binaries import (  # noqa: E402
    Binaries,
    BinariesMissingError,
    read_versions,
    require_binaries,
)
from testcluster.kubeconfig import build_kubeconfig, write_kubeconfig  # noqa: E402
from testcluster.nodepools import build_nodes, load_nodepools  # noqa: E402
from testcluster.pki import make_pki  # noqa: E402
from testcluster.probes import ApiClient, ComponentFailedError, http_ok, wait_until  # noqa: E402
from testcluster.processes import is_running, start_process, stop_process  # noqa: E402
from testcluster.state import ClusterState, ProcessRecord, load_state, save_state  # noqa: E402

# What tests and tools use; the rest is this module's own wiring.
__all__ = [
    "BinariesMissingError",
    "ClusterState",
    "down",
    "load_state",
    "log_tails",
    "main",
    "require_binaries",
    "restart",
    "up",
]

log = logging.getLogger("localcluster")

# Files a running cluster owns besides its logs; `down` removes them, logs stay for post-mortems.
_ATTEMPTS = 2
# The kinds the operator serves. RayCronJob sits behind an alpha feature gate that is off; its
# 0.7 MB CRD would only add seconds to every start-up (each CRD costs the apiserver 2-4 s here).
KUBERAY_CRDS = ("rayclusters", "rayjobs", "rayservices")
_DISPOSABLE = ("pki", "etcd", "certs", "kwok", "kueue", "kubeconfig", "state.json", "state.tmp")


class Cluster:
    """Starts the components in dependency order, recording each PID the moment it exists."""

    def __init__(self, state_dir: Path, binaries: Binaries, timeout: float) -> None:
        self.layout = comp.Layout(state_dir.resolve())
        self.binaries = binaries
        self.timeout = timeout
        self.ports = comp.pick_free_ports()
        self.pki = make_pki(self.layout.pki, comp.KUBERNETES_SERVICE_IP)
        server = f"https://{comp.LOOPBACK}:{self.ports.apiserver}"
        self.api = ApiClient(server, self.pki.admin_token, self.pki.ca_cert)
        write_kubeconfig(
            self.layout.kubeconfig,
            build_kubeconfig(server, self.pki.ca_cert, self.pki.admin_token),
        )
        self.state = ClusterState(
            dir=str(self.layout.root),
            kubeconfig=str(self.layout.kubeconfig),
            server=server,
            log_dir=str(self.layout.logs),
            ports=dict(vars(self.ports)),
            versions=read_versions(),
            binaries={name: str(path) for name, path in vars(binaries).items()},
        )
        save_state(self.state)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> ProcessRecord:
        record = start_process(name, argv, self.layout.logs / f"{name}.log", env)
        self.state.processes.append(record)
        save_state(self.state)
        return record

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        argv = [str(self.binaries.kubectl), f"--kubeconfig={self.layout.kubeconfig}", *args]
        result = subprocess.run(argv, input=stdin, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed:\n{result.stderr.strip()}")
        return result.stdout

    def bring_up(self) -> None:
        started = time.monotonic()
        layout, binaries, ports, timeout = self.layout, self.binaries, self.ports, self.timeout

        etcd = self.start("etcd", comp.etcd_argv(binaries, ports, layout))
        etcd_health = f"http://{comp.LOOPBACK}:{ports.etcd_client}/health"
        wait_until("etcd /health", lambda: http_ok(etcd_health), etcd, timeout)
        log.info("etcd ready after %.1fs", time.monotonic() - started)

        apiserver = self.start(
            "kube-apiserver", comp.apiserver_argv(binaries, ports, layout, self.pki)
        )
        wait_until("kube-apiserver /readyz", self._apiserver_ready, apiserver, timeout)
        log.info("kube-apiserver ready after %.1fs", time.monotonic() - started)

        manager = self.start(
            "kube-controller-manager",
            comp.controller_manager_argv(binaries, ports, layout, self.pki),
        )
        scheduler = self.start("kube-scheduler", comp.scheduler_argv(binaries, ports, layout))
        stages = sorted(binaries.kwok_stages.glob("*.yaml"))
        kwok = self.start(
            "kwok",
            comp.kwok_argv(binaries, layout, stages),
            # kwok also reads ~/.kwok/kwok.yaml when present; a private workdir keeps it out.
            env={"KWOK_WORKDIR": str(layout.kwok_workdir)},
        )
        self.kubectl("create", "-f", "-", stdin=json.dumps(_as_list(build_nodes(load_nodepools()))))
        # The operator starts a controller per CRD kind; a kind the API does not serve yet fails it.
        self._install_kuberay_crds()
        log.info("KubeRay CRDs established after %.1fs", time.monotonic() - started)
        operator = self.start("ray-operator", comp.ray_operator_argv(binaries, ports, layout))
        kueue = self._start_kueue()

        for name, port, process in (
            ("kube-controller-manager", ports.controller_manager, manager),
            ("kube-scheduler", ports.scheduler, scheduler),
        ):
            url = f"https://{comp.LOOPBACK}:{port}/healthz"
            wait_until(f"{name} /healthz", lambda url=url: http_ok(url), process, timeout)
        # Pods are rejected until the controller-manager has made the namespace's ServiceAccount.
        wait_until("ServiceAccount default/default", self._default_sa_exists, manager, timeout)
        wait_until("kwok nodes Ready", self._nodes_ready, kwok, timeout)
        probe = f"http://{comp.LOOPBACK}:{ports.ray_operator_probe}/readyz"
        wait_until("ray-operator /readyz", lambda: http_ok(probe), operator, timeout)
        kueue_probe = f"http://{comp.LOOPBACK}:{ports.kueue_probe}/readyz"
        wait_until("kueue /readyz", lambda: http_ok(kueue_probe), kueue, timeout)

        self.state.ready = True
        self.state.seconds_to_ready = round(time.monotonic() - started, 2)
        save_state(self.state)

    def _start_kueue(self) -> ProcessRecord:
        self.kubectl("create", "namespace", kueue.KUEUE_NAMESPACE)
        cert_dir = self.layout.root / "kueue" / "certs"
        kueue.write_self_signed_cert(cert_dir)
        kueue.ensure_metrics_cert()
        config = kueue.write_config(
            self.layout.root / "kueue" / "config.yaml",
            self.ports.kueue_metrics,
            self.ports.kueue_probe,
            self.ports.kueue_webhook,
            cert_dir,
        )
        argv = kueue.kueue_argv(self.binaries.kueue, self.layout.kubeconfig, config)
        return self.start("kueue", argv)

    def _apiserver_ready(self) -> bool:
        return self.api.get("/readyz")[0] == 200

    def _default_sa_exists(self) -> bool:
        return self.api.get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200

    def _nodes_ready(self) -> bool:
        nodes = self.api.get_json("/api/v1/nodes") or {"items": []}
        ready = {
            item["metadata"]["name"]
            for item in nodes["items"]  # type: ignore[union-attr]
            for condition in item.get("status", {}).get("conditions", [])
            if condition["type"] == "Ready" and condition["status"] == "True"
        }
        wanted = {name for pool in load_nodepools() for name in pool.node_names()}
        return wanted <= ready

    def _install_kuberay_crds(self) -> None:
        files = [self.binaries.kuberay_crds / f"ray.io_{plural}.yaml" for plural in KUBERAY_CRDS]
        # Kueue's CRDs go in the same apply, so the apiserver establishes them all in one wait.
        kueue_files = sorted(self.binaries.kueue_crds.glob("kueue.x-k8s.io_*.yaml"))
        files += kueue_files
        # Server-side: the CRDs exceed the 256 KiB last-applied annotation client-side apply writes.
        self.kubectl("apply", "--server-side", *(f"--filename={path}" for path in files))
        names = [f"{plural}.ray.io" for plural in KUBERAY_CRDS]
        names += [path.stem.split("_", 1)[1] + ".kueue.x-k8s.io" for path in kueue_files]
        for name in names:
            # Not `kubectl wait`: it errors out on a CRD whose status has no conditions yet.
            wait_until(
                f"CRD {name} Established",
                lambda name=name: self._crd_established(name),
                None,
                self.timeout,
            )

    def _crd_established(self, name: str) -> bool:
        crd = self.api.get_json(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        conditions = (crd or {}).get("status", {}).get("conditions") or []  # type: ignore[union-attr]
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def _as_list(items: list[dict[str, object]]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "List", "items": items}


def up(state_dir: Path, timeout: float = 120.0) -> ClusterState:
    """Start a cluster in `state_dir` (or return the one already running there)."""
    binaries = require_binaries()
    existing = load_state(state_dir)
    if existing is not None:
        if existing.ready and all(is_running(p) for p in existing.processes):
            log.info("cluster in %s is already up", state_dir)
            return existing
        log.info("cleaning up a stale cluster in %s", state_dir)
        down(state_dir)
    for attempt in range(1, _ATTEMPTS + 1):
        _remove_disposable(state_dir)
        shutil.rmtree(state_dir / "logs", ignore_errors=True)
        state_dir.mkdir(parents=True, exist_ok=True)
        cluster = Cluster(state_dir, binaries, timeout)
        try:
            cluster.bring_up()
            return cluster.state
        except ComponentFailedError:
            down(state_dir)
            # Free ports are picked before the components bind them; another cluster starting
            # on this machine at the same moment can win the race. Only that is worth a retry.
            if attempt < _ATTEMPTS and _lost_port_race(state_dir):
                log.warning("a port was taken before its component bound it; retrying")
                continue
            log.error("cluster failed to come up; component logs:\n%s", log_tails(state_dir))
            raise
        except BaseException:
            log.error("cluster failed to come up; component logs:\n%s", log_tails(state_dir))
            down(state_dir)
            raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _lost_port_race(state_dir: Path) -> bool:
    return any(
        "address already in use" in path.read_text(errors="replace")
        for path in (state_dir / "logs").glob("*.log")
    )


def down(state_dir: Path) -> list[ProcessRecord]:
    """Stop every recorded PID (reverse start order) and remove all but the logs."""
    state = load_state(state_dir)
    stopped: list[ProcessRecord] = []
    # The kubelet first: it must not see the API vanish under running pods.
    if leftovers := realnode.stop_real_node(state_dir):
        log.error("the real node left behind: %s", "; ".join(leftovers))
    for record in reversed(state.processes if state else []):
        if is_running(record):
            stop_process(record)
            stopped.append(record)
    _remove_disposable(state_dir)
    return stopped


def restart(state_dir: Path, name: str, timeout: float = 60.0) -> ProcessRecord:
    """Stop one component and start it again with the same flags and log (a fault for tests),
    record its new PID so `down` still stops it, and wait until the API answers /readyz."""
    state = load_state(state_dir)
    assert state is not None, f"no cluster recorded in {state_dir}"
    index, old = next((i, r) for i, r in enumerate(state.processes) if r.name == name)
    stop_process(old)
    new = start_process(name, old.argv, Path(old.log))
    state.processes[index] = new
    save_state(state)
    wait_until(f"{name} restarted, /readyz", lambda: _api_ready(state), new, timeout)
    return new


def _remove_disposable(state_dir: Path) -> None:
    for name in _DISPOSABLE:
        path = state_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def log_tails(state_dir: Path, lines: int = 25) -> str:
    """The last `lines` lines of every component's log, for a failed test's report."""
    parts = []
    for path in sorted((state_dir / "logs").glob("*.log")):
        tail = path.read_text(errors="replace").splitlines()[-lines:]
        parts.append(f"===== {path} (last {len(tail)} lines) =====\n" + "\n".join(tail))
    return "\n".join(parts) or f"no component logs under {state_dir / 'logs'}"


def _cmd_up(args: argparse.Namespace) -> int:
    state = up(args.dir, timeout=args.timeout)
    print(f"cluster ready in {state.seconds_to_ready}s at {state.server}")
    if args.real_node != "off":
        reason = realnode.unsupported_reason()
        if reason and args.real_node == "on":
            log.error("--real-node on, but %s", reason)
            return 3
        if reason:
            print(f"no real node ({reason}); every pod runs on the kwok pools")
        else:
            node = start_real_node(state, args.timeout)
            print(f"real node {node.address} Ready in {node.seconds_to_ready}s")
    print(f"export KUBECONFIG={state.kubeconfig}")
    return 0


def start_real_node(
    state: ClusterState, timeout: float = 300.0, names: tuple[str, ...] | None = None
) -> realnode.RealNode:
    """Build (or find cached) the images (`names` only; default all), then start the
    real node beside this cluster. A node that already runs gets the images of today's sources
    (what the host's operator runs)."""
    images = build_images(names) if names else build_images()
    existing = realnode.load_real_node(Path(state.dir))
    # Extra relays (realnode.relay_port) come and go with the tests that need them.
    core = (
        [p for p in existing.processes if not p.name.startswith(RELAY_PREFIX)] if existing else []
    )
    if existing and all(is_running(p) for p in core):
        realnode.import_images(Path(state.dir), existing, images)
        return existing
    return realnode.start_real_node(
        Path(state.dir),
        Path(state.kubeconfig),
        Path(state.binaries["kubectl"]),
        images,
        timeout=timeout,
    )


def _cmd_down(args: argparse.Namespace) -> int:
    stopped = down(args.dir)
    print(f"stopped {len(stopped)} processes: " + ", ".join(f"{p.name}({p.pid})" for p in stopped))
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    state = load_state(args.dir)
    if state is None:
        print(f"no cluster in {args.dir}")
        return 1
    healthy = True
    for record in state.processes:
        alive = is_running(record)
        healthy &= alive
        print(f"{record.name:<24} pid {record.pid:<8} {'running' if alive else 'DEAD'}")
    api_ready = _api_ready(state)
    print(f"api        {state.server} {'ready' if api_ready else 'NOT READY'}")
    print(f"kubeconfig {state.kubeconfig}\nlogs       {state.log_dir}")
    return 0 if healthy and state.ready and api_ready else 1


def _api_ready(state: ClusterState) -> bool:
    kubeconfig = json.loads(Path(state.kubeconfig).read_text())
    token = kubeconfig["users"][0]["user"]["token"]
    ca_cert = Path(state.dir) / "pki" / "ca.crt"
    return ApiClient(state.server, token, ca_cert).get("/readyz")[0] == 200


def _cmd_logs(args: argparse.Namespace) -> int:
    print(log_tails(args.dir, args.lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("up", "down", "status", "logs"))
    parser.add_argument("--dir", type=Path, default=Path(".cluster"), help="state directory")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per readiness wait")
    parser.add_argument("--lines", type=int, default=25, help="log lines per component (logs)")
    parser.add_argument(
        "--real-node",
        choices=("auto", "on", "off"),
        default="off",
        help="up: also start a real kubelet node (auto: when the machine can, saying why not)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="localcluster: %(message)s")
    handlers = {"up": _cmd_up, "down": _cmd_down, "status": _cmd_status, "logs": _cmd_logs}
    try:
        return handlers[args.command](args)
    except BinariesMissingError as error:
        log.error("%s", error)
        return 2


if __name__ == "__main__":
    sys.exit(main())
