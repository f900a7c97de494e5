"""Stopping the real node with a pod still running leaves nothing on the host: no process that
names its work dir (containerd, shims, kubelet) and none of the pod's own processes, no mount
under its work dir or its image store, no cgroup, no KUBE-* or CNI-* chain (iptables or
ip6tables), no veth, route or node address on the host, no process or bind mount holding the
node's network namespace. While it runs, the node's address lives only inside that namespace,
where the kubelet, containerd and the pod run. Then the node starts again for whatever runs
next."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import realnode
from realnode import host, netns

from realpods.pods import real_pod
from support.rljobs import wait_for

pytestmark = pytest.mark.realpods


def test_stop_leaves_no_process_mount_cgroup_or_chain(
    real_node, local_cluster, kubectl, namespace
) -> None:
    pod = real_pod("sleeper", "kuberl.local/pause:3.10", ["/pause"], uid=65532)
    kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    wait_for(
        "the sleeper to run",
        lambda: (
            json.loads(kubectl("get", "pod", "sleeper", "-n", namespace, "-o", "json"))[
                "status"
            ].get("phase")
            == "Running"
        ),
        timeout=60,
    )
    state_dir = Path(local_cluster.dir)
    node = realnode.load_real_node(state_dir)
    assert node is not None
    shims_before = _pids_naming(node.work)
    assert shims_before, "a running pod has a containerd shim that names the node's socket"
    in_pods = _pids_in_cgroups(node.cgroup_root)
    assert in_pods, "the sleeper's processes live in the node's cgroups"
    assert Path(node.store).resolve().as_posix() in Path("/proc/self/mountinfo").read_text()
    assert f" {node.address}/" not in _ip("-o", "addr"), "the node's address is on no host link"
    assert _ip("-o", "addr", "show", "dev", node.host_link) == "", "the host's veth end: none"
    inside = subprocess.run(netns.inside(node.netns, ["ip", "-o", "addr", "show", "dev", "node0"]),
                            capture_output=True, text=True).stdout  # fmt: skip
    assert f" {node.address}/32 " in inside, "the node's address lives in its namespace"
    in_netns = set(netns.pids_in(node.netns_inode))
    assert {p.pid for p in node.processes if p.name in ("kubelet", "containerd")} <= in_netns
    assert set(in_pods) <= in_netns, "the pod (hostNetwork) runs in the node's namespace"

    assert realnode.stop_real_node(state_dir) == []

    assert _pids_naming(node.work) == []
    assert [pid for pid in in_pods if Path(f"/proc/{pid}").exists()] == []
    mountinfo = Path("/proc/self/mountinfo").read_text()
    # The store's paths appear as mount points and in overlay options (lowerdir=...).
    assert node.work not in mountinfo and Path(node.store).resolve().as_posix() not in mountinfo
    assert [path for path in host.cgroup_dirs(node.cgroup_root) if path.exists()] == []
    assert not any(
        (hierarchy / node.cgroup_root.lstrip("/")).exists()
        for hierarchy in Path("/sys/fs/cgroup").iterdir()
    )
    for tool in ("iptables-save", "ip6tables-save"):
        saved = subprocess.run([tool], capture_output=True, text=True, check=True).stdout
        assert ":KUBE-" not in saved and ":CNI-" not in saved, tool
    assert f" {node.address}/" not in _ip("-o", "addr")
    assert _ip("-o", "link", "show", "dev", node.host_link) == ""
    assert _ip("route", "show", "to", "exact", f"{node.address}/32") == ""
    assert netns.pids_in(node.netns_inode) == []
    assert not Path(node.work).exists() and realnode.load_real_node(state_dir) is None

    restarted = _restart(local_cluster, node)
    assert restarted.kubelet_port != 0


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False).stdout


def _pids_naming(text: str) -> list[int]:
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if text.encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _pids_in_cgroups(cgroup_root: str) -> list[int]:
    pids: set[int] = set()
    for path in host.cgroup_dirs(cgroup_root):
        for procs in path.rglob("cgroup.procs") if path.exists() else ():
            pids.update(int(pid) for pid in procs.read_text().split())
    return sorted(pids)


def _restart(local_cluster: Any, node: Any) -> Any:
    return realnode.start_real_node(
        Path(local_cluster.dir),
        Path(local_cluster.kubeconfig),
        Path(local_cluster.binaries["kubectl"]),
        {name: Path(path) for name, path in node.images.items()},
    )
