"""hack/realnode/dns.py without a cluster: a Service name resolves to its running pods; every
other name, with no upstream resolver, is NXDOMAIN (never SERVFAIL: c-ares, gRPC's resolver in
Ray, stops its search list at the first SERVFAIL and never tries the name as written)."""

from __future__ import annotations

import socket
import struct
from typing import Any

from realnode.dns import NXDOMAIN, TYPE_A, Resolver

HEAD = "ray-head-svc.jobs.svc.cluster.local"
POD_IP = "10.254.1.2"


class _Api:
    """The two reads the resolver makes: the Service, then the pods it selects."""

    def get_json(self, path: str) -> dict[str, Any] | None:
        if path == "/api/v1/namespaces/jobs/services/ray-head-svc":
            return {"spec": {"selector": {"ray.io/node-type": "head"}}}
        if path.startswith("/api/v1/namespaces/jobs/pods?labelSelector="):
            running = {"phase": "Running", "podIP": POD_IP}
            return {"items": [{"status": running}, {"status": {"phase": "Pending"}}]}
        return None


def query(name: str, ident: int = 7) -> bytes:
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.split("."))
    return (
        struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0)
        + labels
        + b"\0"
        + struct.pack("!HH", TYPE_A, 1)
    )


def answer(name: str) -> tuple[int, list[str]]:
    """(rcode, A records) of the resolver's reply to `name`."""
    packet = query(name)
    response = Resolver(_Api(), "cluster.local", None).answer(packet)  # type: ignore[arg-type]
    assert response[:2] == packet[:2], "the reply carries the query's id"
    rcode, count = (
        struct.unpack("!H", response[2:4])[0] & 0xF,
        struct.unpack("!H", response[6:8])[0],
    )
    records = response[len(packet) :]
    return rcode, [socket.inet_ntoa(records[12 + 16 * i : 16 + 16 * i]) for i in range(count)]


def test_service_name_resolves_to_its_running_pods() -> None:
    assert answer(HEAD) == (0, [POD_IP])


def test_every_search_list_step_is_nxdomain_without_an_upstream() -> None:
    # A pod's resolv.conf (ndots:5) makes c-ares try these before the name itself.
    for suffix in ("jobs.svc.cluster.local", "svc.cluster.local", "cluster.local"):
        assert answer(f"{HEAD}.{suffix}") == (NXDOMAIN, []), suffix
    assert answer("huggingface.co") == (NXDOMAIN, [])
    assert answer("missing-svc.jobs.svc.cluster.local") == (NXDOMAIN, [])
