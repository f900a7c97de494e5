"""Command lines of the control-plane components: pure builders, no I/O.

Every listener is pinned to 127.0.0.1 explicitly, because most of these components default to all
interfaces (kube-* bind 0.0.0.0, ray-operator's metrics and probes use ":port").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from freeport import free_ports

from testcluster.binaries import Binaries
from testcluster.pki import Pki

LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"  # first address of SERVICE_CIDR, in the serving cert
POD_CIDR = "10.244.0.1/16"  # kwok hands fake pod IPs out of this range
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node=fake"


@dataclass(frozen=True)
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    ray_operator_metrics: int
    ray_operator_probe: int
    kueue_metrics: int
    kueue_probe: int
    kueue_webhook: int


def pick_free_ports() -> Ports:
    """Distinct free loopback ports, claimed against every other picker (hack/freeport.py)."""
    names = list(Ports.__dataclass_fields__)
    return Ports(**dict(zip(names, free_ports(len(names)), strict=True)))


@dataclass(frozen=True)
class Layout:
    """Where one cluster keeps its files, all under the state directory."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def certs(self) -> Path:
        return self.root / "certs"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def kwok_workdir(self) -> Path:
        return self.root / "kwok"


def etcd_argv(binaries: Binaries, ports: Ports, layout: Layout) -> list[str]:
    client = f"http://{LOOPBACK}:{ports.etcd_client}"
    peer = f"http://{LOOPBACK}:{ports.etcd_peer}"
    return [
        str(binaries.etcd),
        "--name=default",
        f"--data-dir={layout.etcd_data}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=default={peer}",
        # Test data is disposable; fsync would only make every write wait on the disk.
        "--unsafe-no-fsync",
        "--logger=zap",
        "--log-level=warn",
    ]


def apiserver_argv(binaries: Binaries, ports: Ports, layout: Layout, pki: Pki) -> list[str]:
    return [
        str(binaries.kube_apiserver),
        f"--etcd-servers=http://{LOOPBACK}:{ports.etcd_client}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={ports.apiserver}",
        f"--cert-dir={layout.certs / 'kube-apiserver'}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        # Controller-manager and scheduler read the front-proxy CA for delegated authentication and
        # log an error every few seconds while it is absent. Nothing holds a cert with this CN.
        f"--requestheader-client-ca-file={pki.ca_cert}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--token-auth-file={pki.token_file}",
        "--authorization-mode=Node,RBAC",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--profiling=false",
    ]


def _delegating_flags(layout: Layout, name: str, port: int) -> list[str]:
    """Flags shared by controller-manager and scheduler: admin kubeconfig, loopback, no election."""
    kubeconfig = str(layout.kubeconfig)
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={port}",
        f"--cert-dir={layout.certs / name}",
        # One replica each; leader election would only add a lease round-trip to start-up.
        "--leader-elect=false",
    ]


def controller_manager_argv(
    binaries: Binaries, ports: Ports, layout: Layout, pki: Pki
) -> list[str]:
    return [
        str(binaries.kube_controller_manager),
        *_delegating_flags(layout, "kube-controller-manager", ports.controller_manager),
        f"--root-ca-file={pki.ca_cert}",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--cluster-signing-cert-file={pki.ca_cert}",
        f"--cluster-signing-key-file={pki.ca_key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        # kwok's lease renewals can stall for tens of seconds on a loaded 2-core machine; a node
        # marked NotReady flips its pods to not-ready and kwok never re-readies a Running pod.
        # Fake nodes never really fail, so give them a long grace period.
        "--node-monitor-grace-period=10m",
        "--profiling=false",
    ]


def scheduler_argv(binaries: Binaries, ports: Ports, layout: Layout) -> list[str]:
    return [
        str(binaries.kube_scheduler),
        *_delegating_flags(layout, "kube-scheduler", ports.scheduler),
        "--profiling=false",
    ]


def kwok_argv(binaries: Binaries, layout: Layout, stage_files: list[Path]) -> list[str]:
    return [
        str(binaries.kwok),
        f"--kubeconfig={layout.kubeconfig}",
        # Only nodes from hack/nodepools.yaml (annotated) are faked; anything else is left alone.
        "--manage-all-nodes=false",
        f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}",
        f"--node-ip={LOOPBACK}",
        f"--cidr={POD_CIDR}",
        # The heartbeat stage rewrites node status only every ~10 min and leaves liveness to node
        # Leases, which kwok renews only with a lease duration (kwokctl's 40 s). Without it the
        # node lifecycle controller sees every node silent once its grace period runs out and
        # flips every pod on them to not-ready, mid-test.
        "--node-lease-duration-seconds=40",
        # INFO logs every node heartbeat; warnings are what a failed test needs.
        "--v=WARN",
        # A bare kwok has no stages; these are the upstream defaults that kwokctl would pass.
        *(f"--config={path}" for path in stage_files),
    ]


def ray_operator_argv(binaries: Binaries, ports: Ports, layout: Layout) -> list[str]:
    return [
        str(binaries.ray_operator),
        f"--kubeconfig={layout.kubeconfig}",
        "--enable-leader-election=false",
        f"--metrics-addr={LOOPBACK}:{ports.ray_operator_metrics}",
        f"--health-probe-bind-address={LOOPBACK}:{ports.ray_operator_probe}",
        "--log-stdout-encoder=console",
    ]
