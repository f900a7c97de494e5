"""Start and stop the real node: containerd, the images, and a kubelet named by its address.

The node's address (10.254.x.y, from the cluster dir) lives in the node's own network namespace,
never on a host interface: containerd, the kubelet and so every hostNetwork pod run there, the
host routes to the address through a veth with a loopback source, and the apiserver is relayed
into the namespace on 127.0.0.1 (netns.py says how and why). Not a loopback address, because
Ray, KubeRay's probes and EndpointSlices all treat 127.x as "not a node" (a Ray worker on a
loopback node never turns Ready). The kubelet's name is that IP: a hostname override that parses
as an IP becomes the node's InternalIP, so the apiserver reaches the kubelet (bound there) for
logs and exec. Everything is recorded in DIR/realnode.json; `stop_real_node` stops exactly those
PIDs, kills what is left in the node's own cgroup, removes the veth, unmounts whatever lies under
its work dir (the namespace's bind mount too) and removes its cgroups. `leftovers` lists anything
that survived (a test asserts it is empty).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml
from freeport import free_port
from testcluster.binaries import cache_root, read_versions
from testcluster.processes import is_running, start_process, stop_process
from testcluster.state import ProcessRecord

from realnode import config, delta, host, netns

log = logging.getLogger("realnode")

REAL_NODE_LABEL = "kuberl.io/real-node"
STATE_FILE = "realnode.json"
STORE_ENV = "KUBERL_REALNODE_STORE"
CGROUP_FS = Path("/sys/fs/cgroup")
CNI_BIN = Path("/usr/lib/cni")
API_RELAY = "realnode-apiserver-relay"
RELAY_PREFIX = "realnode-relay-"  # relays of other host ports (relay_port)
HOST_TOOLS = ("containerd", "containerd-shim-runc-v2", "ctr", "runc", "ip", "nsenter", "unshare")


@dataclass
class RealNode:
    work: str
    socket: str
    cgroup_root: str
    kubelet_port: int
    # The node's IP and name: a /32 inside its network namespace (netns.py).
    address: str
    # The node's cluster DNS (dns.py) on port 53 of the namespace's loopback.
    dns_address: str
    # The namespace's bind mount, the veth's host end and the host's source address towards
    # the node (loopback), and the namespace's inode (/proc/PID/ns/net of what runs in it).
    netns: str = ""
    host_link: str = ""
    host_source: str = ""
    netns_inode: int = 0
    # The containerd root holding the images (containerd_root() when the node started).
    store: str = field(default_factory=lambda: str(containerd_root()))
    images: dict[str, str] = field(default_factory=dict)
    processes: list[ProcessRecord] = field(default_factory=list)
    seconds_to_ready: float | None = None


def kubelet_binary() -> Path:
    version = read_versions()["KUBERNETES_VERSION"]
    return cache_root() / "bin" / f"kubelet-{version}" / "kubelet"


def unsupported_reason() -> str | None:
    """Why this machine cannot run the real node, or None when it can."""
    if os.geteuid() != 0:
        return "the real node needs root (containerd, runc, overlay mounts, cgroups)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlayfs (containerd's snapshotter needs it)"
    if not host.cgroup_hierarchies():
        return f"no cgroup hierarchy is mounted under {CGROUP_FS}"
    missing = [tool for tool in HOST_TOOLS if shutil.which(tool) is None]
    if not (CNI_BIN / "loopback").exists():
        missing.append(str(CNI_BIN / "loopback"))
    if missing:
        return f"missing {', '.join(missing)}: run `make realnode-deps` (hack/realnode-deps.sh)"
    if not kubelet_binary().exists():
        return f"no kubelet at {kubelet_binary()}: run `make cluster-bin`"
    return None


def start_real_node(
    state_dir: Path, kubeconfig: Path, kubectl: Path, images: dict[str, Path], timeout: float = 120
) -> RealNode:
    """Start containerd, import `images` (name -> docker-archive tarball), start the kubelet and
    wait until the node is Ready. Raises RuntimeError with the reason when it cannot."""
    if reason := unsupported_reason():
        raise RuntimeError(f"cannot start a real node: {reason}")
    _refuse_if_store_in_use(containerd_root())  # before anything stop_real_node would undo
    started = time.monotonic()
    work = state_dir / "realnode"
    work.mkdir(parents=True, exist_ok=True)
    logs = state_dir / "logs"
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:8]
    octets = f"{int(digest[4:6], 16)}.{int(digest[6:8], 16) % 254 + 1}"
    node = RealNode(
        work=str(work),
        socket=str(work / "containerd" / "containerd.sock"),
        cgroup_root=f"/kuberl-realpod-{digest}",
        kubelet_port=free_port(),
        address=f"10.254.{octets}",
        dns_address=netns.LOOPBACK,
        netns=str(work / "netns"),
        host_link=f"krnode-{digest}",
        host_source=f"127.254.{octets}",
    )
    save_real_node(state_dir, node)
    try:
        host.make_cgroups(node.cgroup_root)
        node.netns_inode = netns.create(node.netns, node.host_link, node.address, node.host_source)
        save_real_node(state_dir, node)
        _write_configs(work, node)
        relay = start_process(
            API_RELAY,
            [sys.executable, str(netns.RELAY), "--netns", node.netns,
             "--port", str(_apiserver_port(kubeconfig))],
            logs / "realnode-relay.log",
        )  # fmt: skip
        node.processes.append(relay)
        containerd = start_process(
            "containerd",
            netns.inside(node.netns, ["containerd", "--config", str(work / "containerd.toml")]),
            logs / "containerd.log",
        )
        node.processes.append(containerd)
        save_real_node(state_dir, node)
        _wait("containerd's socket", lambda: Path(node.socket).exists(), containerd, timeout)
        dns = start_process(
            "realnode-dns",
            [sys.executable, str(Path(__file__).with_name("dns.py")), "--state-dir",
             str(state_dir), "--address", node.dns_address, "--netns", node.netns],
            logs / "realnode-dns.log",
        )  # fmt: skip
        node.processes.append(dns)
        save_real_node(state_dir, node)
        import_images(state_dir, node, images)
        kubelet = start_process(
            "kubelet",
            netns.inside(node.netns, _kubelet_argv(work, kubeconfig, node.address)),
            logs / "kubelet.log",
        )
        node.processes.append(kubelet)
        save_real_node(state_dir, node)
        _wait(
            "the real node Ready",
            lambda: _node_ready(kubectl, kubeconfig, node.address),
            kubelet,
            timeout,
        )
    except BaseException:
        stop_real_node(state_dir)
        raise
    node.seconds_to_ready = round(time.monotonic() - started, 1)
    save_real_node(state_dir, node)
    log.info("real node %s Ready in %.1fs", node.address, node.seconds_to_ready)
    return node


def stop_real_node(state_dir: Path) -> list[str]:
    """Stop the node recorded in `state_dir` and clean up after it; returns the leftovers."""
    node = load_real_node(state_dir)
    if node is None:
        return []
    kubelet = [p for p in node.processes if p.name == "kubelet"]
    containerd = [p for p in node.processes if p.name == "containerd"]
    for record in kubelet + [p for p in node.processes if p.name == "realnode-dns"]:
        stop_process(record)
    if any(is_running(p) for p in containerd):
        _remove_all_tasks(node)
    for record in containerd:
        stop_process(record)
    for record in node.processes:
        if record.name == API_RELAY or record.name.startswith(RELAY_PREFIX):
            stop_process(record)
    host.kill_cgroup_members(node.cgroup_root)
    if node.host_link:
        netns.remove(node.host_link)
    host.unmount_under(Path(node.work))
    host.unmount_under(Path(node.store))
    host.remove_cgroups(node.cgroup_root)
    remaining = leftovers(node)
    if remaining:
        log.warning("the real node left behind:\n  %s", "\n  ".join(remaining))
    else:
        shutil.rmtree(node.work, ignore_errors=True)
        (state_dir / STATE_FILE).unlink(missing_ok=True)
    return remaining


def leftovers(node: RealNode) -> list[str]:
    """Processes, mounts, cgroups and iptables chains the node left on the host."""
    found = [f"process {p.name} ({p.pid})" for p in node.processes if is_running(p)]
    found += [f"process {pid}: {cmd}" for pid, cmd in host.processes_mentioning(node.work)]
    found += [f"mount {point}" for point in host.mounts_under(Path(node.work))]
    found += [f"mount {point}" for point in host.mounts_under(Path(node.store))]
    found += [f"cgroup {path}" for path in host.cgroup_dirs(node.cgroup_root) if path.exists()]
    found += [f"iptables chain {chain}" for chain in host.kube_chains()]
    found += netns.leftovers(node.netns_inode, node.host_link, node.address)
    return found


def load_real_node(state_dir: Path) -> RealNode | None:
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    raw = json.loads(path.read_text())
    raw["processes"] = [ProcessRecord(**record) for record in raw["processes"]]
    return RealNode(**raw)


def ctr(node: RealNode, *args: str, stdin: bytes | None = None) -> str:
    result = subprocess.run(
        ["ctr", "--address", node.socket, "--namespace", "k8s.io", *args],
        input=stdin,
        capture_output=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"ctr {' '.join(args)}: {result.stderr.decode(errors='replace')}")
    return result.stdout.decode()


# ---------------------------------------------------------------------------------------------


def save_real_node(state_dir: Path, node: RealNode) -> None:
    path = state_dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(node), indent=2) + "\n")
    tmp.replace(path)


def _wait(what: str, check, process: ProcessRecord, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if not is_running(process):
            raise RuntimeError(f"{process.name} exited while waiting for {what}; see {process.log}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


def _write_configs(work: Path, node: RealNode) -> None:
    Path(node.store).mkdir(parents=True, exist_ok=True)
    (work / "containerd.toml").write_text(config.containerd_config(work, Path(node.store)))
    (work / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
    (work / "cni" / "net.d" / "10-loopback.conflist").write_text(config.cni_conflist())
    healthz = free_port()
    (work / "kubelet.yaml").write_text(
        config.kubelet_config(
            work, node.cgroup_root, node.address, node.kubelet_port, healthz, node.dns_address
        )
    )


def _apiserver_port(kubeconfig: Path) -> int:
    """The apiserver's port on the host's 127.0.0.1, relayed into the node's namespace."""
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    url = urllib.parse.urlparse(server)
    if url.hostname != netns.LOOPBACK or url.port is None:
        raise RuntimeError(
            f"{kubeconfig}: server {server!r}: the real node relays only an apiserver on "
            f"https://{netns.LOOPBACK}:PORT into its namespace; point the kubeconfig there"
        )
    return url.port


def _kubelet_argv(work: Path, kubeconfig: Path, address: str) -> list[str]:
    return [
        str(kubelet_binary()),
        f"--config={work / 'kubelet.yaml'}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={work / 'kubelet'}",
        f"--cert-dir={work / 'kubelet-pki'}",
        f"--hostname-override={address}",
        f"--node-ip={address}",
        f"--node-labels={REAL_NODE_LABEL}=true,kuberl.io/pool=real",
        "--v=2",
    ]


def containerd_root() -> Path:
    """The image store, kept in the cache between nodes. One node at a time uses a store
    (containerd locks its metadata database); a second node at the same time needs its own,
    named by KUBERL_REALNODE_STORE (it imports every image once)."""
    if store := os.environ.get(STORE_ENV):
        return Path(store).resolve()
    return cache_root() / "realnode" / "containerd"


def import_images(state_dir: Path, node: RealNode, images: dict[str, Path]) -> None:
    """Import each tarball (name -> docker-archive) the store does not hold yet, also into a
    running node: pods started afterwards run the new image (imagePullPolicy: Never)."""
    for name, tarball in images.items():
        _import_image(node, name, tarball)
    save_real_node(state_dir, node)


def store_in_use_reason() -> str | None:
    """Why a new real node cannot start on this machine's image store now (another node's
    containerd holds it), or None: callers can choose before building or starting anything."""
    try:
        _refuse_if_store_in_use(containerd_root())
    except RuntimeError as err:
        return str(err)
    return None


def _refuse_if_store_in_use(store: Path) -> None:
    """A second containerd on a store waits forever for its metadata database (bolt holds an
    flock on it), and stopping that node would unmount the first node's mounts in it. Refuse."""
    database = store / "io.containerd.metadata.v1.bolt" / "meta.db"
    if not database.exists():
        return
    with database.open("rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(
                f"the real node's image store {store} is in use by another real node's "
                f"containerd; one node per store: stop that node (python hack/localcluster.py "
                f"down --dir DIR) or give this one its own store ({STORE_ENV}=DIR)"
            ) from None
        fcntl.flock(handle, fcntl.LOCK_UN)


def _import_image(node: RealNode, name: str, tarball: Path) -> None:
    """Import an image (a docker-archive, or hack/realimages.sh's OCI layout directory) unless
    the store already holds it (their names carry their key)."""
    started = time.monotonic()
    record = Path(node.store) / "kuberl-imported.json"
    imported = json.loads(record.read_text()) if record.exists() else {}
    if imported.get(name) != tarball.name:
        if tarball.is_dir():  # an OCI layout: only the blobs the store lacks (delta.py)
            delta.import_missing(
                ["ctr", "--address", node.socket, "--namespace", "k8s.io"], tarball
            )
        else:
            ctr(node, "images", "import", "--snapshotter", "overlayfs", str(tarball))
        record.write_text(json.dumps({**imported, name: tarball.name}, indent=2))
        log.info("imported %s (%s) in %.1fs", name, tarball.name, time.monotonic() - started)
    node.images[name] = str(tarball)


def _node_ready(kubectl: Path, kubeconfig: Path, name: str) -> bool:
    result = subprocess.run(
        [
            str(kubectl),
            f"--kubeconfig={kubeconfig}",
            "get",
            "node",
            name,
            "-o",
            "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode == 0 and result.stdout.strip() == "True"


def _remove_all_tasks(node: RealNode) -> None:
    """Kill every container's task and delete it, so each containerd shim exits."""
    for task in ctr(node, "tasks", "ls", "-q").split():
        subprocess.run(
            ["ctr", "--address", node.socket, "-n", "k8s.io", "tasks", "rm", "-f", task],
            capture_output=True,
            check=False,
        )
    for container in ctr(node, "containers", "ls", "-q").split():
        subprocess.run(
            ["ctr", "--address", node.socket, "-n", "k8s.io", "containers", "rm", container],
            capture_output=True,
            check=False,
        )
