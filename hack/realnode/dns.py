"""Cluster DNS for the real node's pods: `<service>.<namespace>.svc.<domain>` resolves to the
IPs of the running pods the service selects (there is no kube-proxy, so a ClusterIP would lead
nowhere; hostNetwork pods' IPs are node addresses). KubeRay's workers find their head this way
(its Service's DNS name). Every other name does not exist (NXDOMAIN) unless `--upstream` names a
resolver to relay it to: the node's test traffic stays on loopback and inside its own namespace.
NXDOMAIN, not SERVFAIL: gRPC's resolver (c-ares, Ray's GCS client) walks the pod's search list
(`ndots:5`) and gives up at the first SERVFAIL, before it reaches the name as written.

    python hack/realnode/dns.py --state-dir DIR --netns DIR/realnode/netns --port 53

With `--netns` the socket listens inside the node's network namespace (netns.py), while the
process, its apiserver client and any relaying stay on the host's network.
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import struct
import sys
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testcluster.probes import ApiClient

from realnode.netns import listen_inside

log = logging.getLogger("realnode-dns")
TYPE_A, CLASS_IN, TTL = 1, 1, 5
NXDOMAIN, SERVFAIL = 3, 2


def question(packet: bytes) -> tuple[str, int, int]:
    """(name, qtype, end offset of the question) of a query's first question."""
    labels, offset = [], 12
    while length := packet[offset]:
        labels.append(packet[offset + 1 : offset + 1 + length].decode("ascii", "replace"))
        offset += 1 + length
    qtype, _ = struct.unpack("!HH", packet[offset + 1 : offset + 5])
    return ".".join(labels).lower(), qtype, offset + 5


def reply(packet: bytes, end: int, rcode: int, addresses: list[str]) -> bytes:
    flags = 0x8180 | rcode  # response, recursion desired + available
    header = packet[:2] + struct.pack("!HHHHH", flags, 1, len(addresses), 0, 0)
    answers = b"".join(
        struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, TTL, 4) + socket.inet_aton(address)
        for address in addresses
    )
    return header + packet[12:end] + answers


class Resolver:
    def __init__(self, api: ApiClient, domain: str, upstream: str | None) -> None:
        self.api, self.suffix, self.upstream = api, f".svc.{domain}", upstream

    def answer(self, packet: bytes) -> bytes:
        name, qtype, end = question(packet)
        if not name.endswith(self.suffix):
            return self.relay(packet)
        parts = name.removesuffix(self.suffix).split(".")
        if len(parts) != 2:
            return reply(packet, end, NXDOMAIN, [])
        service, namespace = parts
        addresses = self.pod_addresses(namespace, service)
        if addresses is None:
            return reply(packet, end, NXDOMAIN, [])
        log.info("%s -> %s", name, addresses)
        return reply(packet, end, 0, addresses if qtype == TYPE_A else [])

    def pod_addresses(self, namespace: str, service: str) -> list[str] | None:
        """IPs of the running pods the Service selects; None when there is no such Service.
        (Endpoints cannot help: they refuse loopback addresses, the real node's pod IP.)"""
        found = self.api.get_json(f"/api/v1/namespaces/{namespace}/services/{service}")
        if found is None:
            return None
        selector = ",".join(f"{k}={v}" for k, v in (found["spec"].get("selector") or {}).items())
        if not selector:
            return []
        pods = self.api.get_json(
            f"/api/v1/namespaces/{namespace}/pods?labelSelector={urllib.parse.quote(selector)}"
        )
        return sorted(
            {
                pod["status"]["podIP"]
                for pod in (pods or {}).get("items", [])
                if pod["status"].get("phase") == "Running" and pod["status"].get("podIP")
            }
        )

    def relay(self, packet: bytes) -> bytes:
        if self.upstream is None:
            return reply(packet, question(packet)[2], NXDOMAIN, [])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as upstream:
            upstream.settimeout(3)
            try:
                upstream.sendto(packet, (self.upstream, 53))
                return upstream.recv(4096)
            except OSError:
                return reply(packet, question(packet)[2], SERVFAIL, [])


def bound_socket(address: str, port: int, netns: str | None) -> socket.socket:
    def make() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((address, port))
        return sock

    return make() if netns is None else listen_inside(netns, make)


def serve(resolver: Resolver, address: str, port: int, netns: str | None) -> None:
    with bound_socket(address, port, netns) as sock:
        log.info("serving cluster DNS on %s:%d%s", address, port, f" in {netns}" * bool(netns))
        while True:
            packet, peer = sock.recvfrom(4096)
            try:
                sock.sendto(resolver.answer(packet), peer)
            except (IndexError, struct.error, UnicodeError):
                log.warning("malformed query from %s", peer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=53)
    parser.add_argument("--domain", default="cluster.local")
    parser.add_argument("--netns", help="listen inside this network namespace (its bind mount)")
    parser.add_argument("--upstream", help="relay other names to this resolver (default: none)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="realnode-dns: %(message)s")
    state = json.loads((args.state_dir / "state.json").read_text())
    kubeconfig = json.loads(Path(state["kubeconfig"]).read_text())
    api = ApiClient(
        state["server"], kubeconfig["users"][0]["user"]["token"], args.state_dir / "pki" / "ca.crt"
    )
    serve(Resolver(api, args.domain, args.upstream), args.address, args.port, args.netns)


if __name__ == "__main__":
    main()
