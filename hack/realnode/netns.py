"""The real node's own network namespace: the node's address lives there, never on the host.

Test traffic goes only to 127.0.0.0/8 or to addresses inside namespaces the harness creates. The
node needs an address that is not loopback (Ray, KubeRay's probes and EndpointSlices treat 127.x
as "not a node": a Ray worker on a loopback node never turns Ready), so containerd, the kubelet
and with them every hostNetwork pod run in a namespace of the node's own (`DIR/realnode/netns`,
a bind mount `unshare --net=` makes), and the node's address (10.254.x.y) sits on that
namespace's end of a veth pair. The host's end carries no address at all (IPv6 off too):

* host -> node: a /32 route to the node's address through the host's end, with a loopback
  source of the node's own (127.254.x.y). `route_localnet` on both ends (a per-device setting
  that goes with the device) lets a 127.x source cross the veth. The apiserver reaches the
  kubelet, the operator Ray's dashboard and the tests rank 0's metrics this way.
* node -> host: nothing routes out of the namespace but the replies to that source. Clients of
  the apiserver in the node (kubelet, the pods' runtime with KUBERNETES_SERVICE_HOST=127.0.0.1)
  dial 127.0.0.1:<apiserver port> inside it, where relay.py listens and relays to the
  apiserver on the host's 127.0.0.1. The cluster DNS listens on the namespace's 127.0.0.1:53.

Inside, `lo` holds 127.0.0.1/32 only (not the usual /8), so replies to 127.254.x.y leave through
the veth instead of landing on the namespace's own loopback. Why not the alternatives: the whole
control plane in one namespace would move every other tier's processes and clients; iptables
DNAT into the namespace would add rules to the host's tables. This arrangement adds to the host
one veth end (no address) and one route, both gone with `remove`; the namespace goes when its
bind mount is unmounted and its last process and socket are gone (`leftovers` checks).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

CLONE_NEWNET = 0x40000000
NODE_LINK = "node0"  # the namespace's end of the veth
LOOPBACK = "127.0.0.1"
RELAY = Path(__file__).with_name("relay.py")  # node -> host: the apiserver on 127.0.0.1


def inside(netns: str, argv: list[str]) -> list[str]:
    """`argv` run in the node's namespace (nsenter execs it: the PID stays the command's)."""
    return ["nsenter", f"--net={netns}", "--", *argv]


def create(netns: str, host_link: str, address: str, host_source: str) -> int:
    """Make the namespace, the veth pair, the addresses and routes; returns the namespace's inode
    (processes in it have it as /proc/PID/ns/net)."""
    Path(netns).touch()
    _run("unshare", f"--net={netns}", "true")
    _run("ip", "link", "add", host_link, "type", "veth", "peer", "name", NODE_LINK, "netns", netns)
    _write_sysctl(f"net/ipv6/conf/{host_link}/disable_ipv6", "1")
    _write_sysctl(f"net/ipv4/conf/{host_link}/route_localnet", "1")
    node = ["nsenter", f"--net={netns}", "--"]
    for argv in (
        # Given before `lo` comes up; the kernel adds 127.0.0.1/8 anyway, deleted next.
        ["ip", "addr", "add", f"{LOOPBACK}/32", "dev", "lo"],
        ["ip", "link", "set", "lo", "up"],
        ["ip", "addr", "del", f"{LOOPBACK}/8", "dev", "lo"],
        ["sysctl", "-q", "-w", f"net.ipv6.conf.{NODE_LINK}.disable_ipv6=1"],
        ["sysctl", "-q", "-w", f"net.ipv4.conf.{NODE_LINK}.route_localnet=1"],
        ["ip", "addr", "add", f"{address}/32", "dev", NODE_LINK],
        ["ip", "link", "set", NODE_LINK, "up"],
        ["ip", "route", "add", f"{host_source}/32", "dev", NODE_LINK, "src", address],
    ):
        _run(*node, *argv)
    _run("ip", "link", "set", host_link, "up")
    _run("ip", "route", "add", f"{address}/32", "dev", host_link, "src", host_source)
    return os.stat(netns).st_ino


def remove(host_link: str) -> None:
    """Delete the veth pair (its route and settings go with it); the caller unmounts `netns`."""
    subprocess.run(["ip", "link", "del", host_link], capture_output=True, check=False)


def leftovers(netns_inode: int, host_link: str, address: str) -> list[str]:
    """The veth's host end, the route, the address on any host interface, processes in the
    namespace. (Its bind mount lies under the node's work dir: node.leftovers lists it.)"""
    found = []
    if _ip("-o", "link", "show", "dev", host_link):
        found.append(f"link {host_link}")
    if _ip("route", "show", "to", "exact", f"{address}/32"):
        found.append(f"route to {address}")
    found += [
        f"address {address} on {line.split()[1]}"
        for line in _ip("-o", "addr", "show").splitlines()
        if f" {address}/" in line
    ]
    found += [f"process {pid} in the node's netns" for pid in pids_in(netns_inode)]
    return found


def pids_in(netns_inode: int) -> list[int]:
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if netns_inode and os.stat(proc / "ns" / "net").st_ino == netns_inode:
                pids.append(int(proc.name))
    return pids


def listen_inside(netns: str, make: Callable[[], socket.socket]) -> socket.socket:
    """A socket `make` creates (and binds) in the node's namespace; the caller stays on the
    host's network for everything else (a socket keeps the namespace it was made in)."""
    with _entered(netns):
        return make()


@contextlib.contextmanager
def _entered(netns: str) -> Iterator[None]:
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/self/ns/net") as home, open(netns) as target:
        _setns(libc, target.fileno())
        try:
            yield
        finally:
            _setns(libc, home.fileno())


def _setns(libc: ctypes.CDLL, fd: int) -> None:
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def _write_sysctl(key: str, value: str) -> None:
    Path("/proc/sys", key).write_text(value)


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False).stdout


def _run(*argv: str) -> None:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {result.stderr.strip()}")
