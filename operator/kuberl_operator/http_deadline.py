"""HTTP to a Ray head with one deadline for the whole call, and no redirects.

A socket timeout bounds each read, not the call: a head that sends one byte every few seconds
keeps ``urllib`` reading for as long as it likes. Here every read and write of the connection
gets the time left until the call's deadline as its timeout, so connect, headers and body
together end by the deadline, whatever the head does. ``http.client`` follows no redirect: a
3xx is an answer like any other, and the job's token never goes to another address.
"""

import http.client
import socket
import time
import urllib.parse
from typing import Any


class CallDeadline(TimeoutError):
    """The whole call (connect, request, answer) did not finish by its deadline."""


class _DeadlineSocket(socket.socket):
    """A connected socket whose every blocking call ends by ``deadline`` (monotonic)."""

    deadline: float = 0.0

    def _arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CallDeadline("the call's deadline passed")
        self.settimeout(left)

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._arm()
        return super().recv_into(buffer, nbytes, flags)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        self._arm()
        return super().recv(bufsize, flags)

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._arm()
        super().sendall(data, flags)

    def send(self, data: Any, flags: int = 0) -> int:
        self._arm()
        return super().send(data, flags)


class _Connection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int | None, deadline: float) -> None:
        super().__init__(host, port, timeout=max(deadline - time.monotonic(), 0.001))
        self.deadline = deadline

    def connect(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CallDeadline("the call's deadline passed before connecting")
        raw = socket.create_connection((self.host, self.port), timeout=left)
        wrapped = _DeadlineSocket(raw.family, raw.type, raw.proto, fileno=raw.detach())
        wrapped.deadline = self.deadline
        wrapped.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = wrapped


def open_with_deadline(
    url: str, method: str, body: bytes | None, headers: dict[str, str], seconds: float
) -> tuple[http.client.HTTPResponse, _Connection]:
    """Send one request; the answer's status and headers are read, its body is left to the
    caller (reads still end by the deadline). Close the connection when done."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"only http://host[:port] dashboard URLs are supported, got {url!r}")
    connection = _Connection(parts.hostname, parts.port, time.monotonic() + seconds)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    try:
        connection.request(method, target, body=body, headers=headers)
        return connection.getresponse(), connection
    except BaseException:
        connection.close()
        raise
