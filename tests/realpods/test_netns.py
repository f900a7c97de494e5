"""The real node's network namespace on its own (hack/realnode/netns.py, relay.py), no kubelet:
the host reaches a server on the node's address from a loopback source, the namespace reaches the
host's 127.0.0.1 only through the relay, routes nowhere else, the host's veth end holds no
address, and removing it all leaves no link, route, address, mount or process behind."""

from __future__ import annotations

import hashlib
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from freeport import free_port
from realnode import netns
from testcluster.processes import start_process, stop_process

from realpods.pods import require_real_node_support
from support.rljobs import wait_for

pytestmark = pytest.mark.realpods

# Inside the namespace: connect to argv[1]:argv[2], print what the server sends.
CLIENT = (
    "import socket, sys\n"
    "with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) as s:\n"
    "    print(s.recv(100).decode())\n"
)
# Inside the namespace: accept one connection on argv[1]:argv[2], send the peer's address.
SERVER = (
    "import socket, sys\n"
    "s = socket.create_server((sys.argv[1], int(sys.argv[2])))\n"
    "print('listening', flush=True)\n"
    "conn, peer = s.accept()\n"
    "conn.sendall(peer[0].encode())\n"
)


class _Hello(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"hello from the host")


@pytest.fixture
def network(tmp_path: Path) -> Iterator[dict[str, str | int]]:
    require_real_node_support()
    digest = hashlib.sha256(str(tmp_path).encode()).hexdigest()[:8]
    octets = f"{int(digest[:2], 16)}.{int(digest[2:4], 16) % 254 + 1}"
    made = {
        "netns": str(tmp_path / "netns"),
        "host_link": f"krtest-{digest}",
        "address": f"10.253.{octets}",
        "host_source": f"127.253.{octets}",
    }
    try:
        made["inode"] = netns.create(**made)  # type: ignore[arg-type]
        yield made
    finally:
        netns.remove(str(made["host_link"]))
        subprocess.run(["umount", made["netns"]], capture_output=True, check=False)


def test_node_namespace_reaches_only_loopback_and_leaves_nothing(network, tmp_path) -> None:
    path, address = str(network["netns"]), str(network["address"])
    link, source = str(network["host_link"]), str(network["host_source"])
    assert f" {address}/" not in _run(["ip", "-o", "addr"]).stdout, "on no host interface"
    assert _run(["ip", "-o", "addr", "show", "dev", link]).stdout == "", "host end: no address"
    assert f"dev {link} src {source}" in _run(["ip", "route", "get", address]).stdout

    # host -> node: the server inside sees the host's loopback source.
    port = free_port()
    server = subprocess.Popen(
        netns.inside(path, [sys.executable, "-c", SERVER, address, str(port)]),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdout.readline().strip() == "listening"
    with socket.create_connection((address, port), timeout=10) as conn:
        assert conn.recv(100).decode() == source
    server.wait(timeout=30)

    # node -> host: only through the relay, on 127.0.0.1 at both ends.
    with socketserver.ThreadingTCPServer((netns.LOOPBACK, free_port()), _Hello) as host_server:
        threading.Thread(target=host_server.serve_forever, daemon=True).start()
        host_port = str(host_server.server_address[1])
        client = netns.inside(path, [sys.executable, "-c", CLIENT, netns.LOOPBACK, host_port])
        refused = _run(client)
        assert refused.returncode != 0 and "ConnectionRefused" in refused.stderr
        relay = start_process(
            "relay",
            [sys.executable, str(netns.RELAY), "--netns", path, "--port", host_port],
            tmp_path / "relay.log",
        )
        try:
            answer = wait_for(
                "the host's server through the relay",
                lambda: _run(client).stdout.strip(),
                timeout=60,
            )
            assert answer == "hello from the host"
        finally:
            stop_process(relay)
        host_server.shutdown()

    # A route lookup only (no packet): nothing but the host's source is routed from inside.
    elsewhere = _run(netns.inside(path, ["ip", "route", "get", "203.0.113.1"]))
    assert elsewhere.returncode != 0 and "unreachable" in elsewhere.stderr
    loopback = _run(netns.inside(path, ["ip", "-o", "-4", "addr", "show", "dev", "lo"])).stdout
    assert " 127.0.0.1/32 " in loopback and "/8" not in loopback

    netns.remove(link)
    subprocess.run(["umount", path], check=True)
    assert netns.leftovers(int(network["inode"]), link, address) == []
    assert path not in Path("/proc/self/mountinfo").read_text()


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)
