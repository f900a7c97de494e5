"""A Ray call has one deadline for connect + the whole answer, and follows no redirect: a head
that drips bytes holds a thread only until the deadline, so it costs its own job and nobody
else's; a head that redirects never receives the token elsewhere; a head that answers without a
token is told apart from one that refuses (HeadUnauthenticated)."""

import contextlib
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from kuberl_operator.ray_gateway import RayGateway
from kuberl_operator.ray_jobs import DashboardUnavailable, RayJobsClient

DRIP_SECONDS = 0.05  # one byte per interval: a 100 KB answer would take over an hour
TOKEN = "tok-" + "s3cr3t" * 8


class Head(BaseHTTPRequestHandler):
    """/drip-body/..: headers, then a body one byte at a time; /drip-headers/..: one header
    byte at a time, forever; /redirect/..: 302 to the ``elsewhere`` server; /open/..: answers
    without a token; anything else: a locked head (401 without the token)."""

    seen: ClassVar[list[dict[str, str]]] = []
    elsewhere = ""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        type(self).seen.append({"path": self.path, **dict(self.headers)})
        with contextlib.suppress(OSError):  # the client gave up: what a deadline does
            self._answer()

    def _answer(self) -> None:
        if self.path.startswith("/drip-body/"):
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self._drip(b'{"status": "RUNNING", "message": "' + b"x" * 99_000)
        elif self.path.startswith("/drip-headers/"):
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            self._drip(b"y" * 60_000)
        elif self.path.startswith("/redirect/"):
            self.send_response(302)
            self.send_header("Location", type(self).elsewhere + "/api/version")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith("/open/") or self.headers.get("x-ray-authorization"):
            self._json(200, b'{"session_name": "s1", "status": "RUNNING"}')
        else:
            self._json(401, b"Unauthorized: Missing authentication token")

    def _json(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _drip(self, data: bytes) -> None:
        for index in range(len(data)):
            self.wfile.write(data[index : index + 1])
            self.wfile.flush()
            time.sleep(DRIP_SECONDS)


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class Elsewhere(Head):
    seen: ClassVar[list[dict[str, str]]] = []


@pytest.fixture
def head() -> Iterator[str]:
    Head.seen, Elsewhere.seen = [], []
    other, Head.elsewhere = serve(Elsewhere)
    server, url = serve(Head)
    yield url
    server.shutdown()
    other.shutdown()


@pytest.mark.parametrize("where", ["drip-body", "drip-headers"])
def test_a_dripping_head_ends_at_the_deadline_with_a_redacted_error(head: str, where: str):
    client = RayJobsClient(f"{head}/{where}", token=TOKEN, timeout=1)
    with pytest.raises(DashboardUnavailable) as raised:
        client.get("grpo-1")
    message = str(raised.value)
    assert message.startswith("GET /api/jobs/grpo-1: ") and "timed out" in message
    assert TOKEN not in message


def test_no_redirect_is_followed_and_the_token_stays_with_the_head(head: str):
    client = RayJobsClient(f"{head}/redirect", token=TOKEN, timeout=2)
    with pytest.raises(DashboardUnavailable, match="HTTP 302"):
        client.version()
    assert Elsewhere.seen == []
    assert Head.seen[0]["x-ray-authorization"] == f"Bearer {TOKEN}"


def test_a_head_answering_without_a_token_is_told_apart(head: str):
    assert RayJobsClient(head, token=TOKEN, timeout=2).refuses_anonymous() is True
    assert RayJobsClient(f"{head}/open", token=TOKEN, timeout=2).refuses_anonymous() is False
    assert all("x-ray-authorization" not in request for request in Head.seen)


def test_forty_dripping_heads_leave_the_gateway_to_everyone_else(head: str):
    # The dripping heads' answers end at their 1 s deadline; the healthy head's answer may take
    # up to 8 s on a loaded machine: without the deadline every gateway thread (32 for 40 heads)
    # would drip for over an hour and the healthy call would time out at the gateway's 10 s.
    gateway = RayGateway(call_timeout=10, workers=32)
    make = gateway.wrap(lambda url, token: RayJobsClient(url, token, timeout=1))
    slow = [make(f"{head}/drip-body/h{i}", TOKEN) for i in range(40)]
    patient = gateway.wrap(lambda url, token: RayJobsClient(url, token, timeout=8))

    def poll(client: Any) -> str:
        try:
            return client.get("grpo-1").status
        except DashboardUnavailable as err:
            return f"unavailable: {err}"

    try:
        with ThreadPoolExecutor(max_workers=40) as callers:
            dripping = [callers.submit(poll, client) for client in slow]
            time.sleep(0.5)  # every gateway thread is now reading a dripping answer
            healthy = poll(patient(head, TOKEN))
            outcomes = [call.result() for call in dripping]
    finally:
        gateway.shutdown()
    assert healthy == "RUNNING"
    assert all(outcome.startswith("unavailable: ") for outcome in outcomes)


def test_an_attempt_on_a_head_without_its_lock_fails_head_unauthenticated(harness: Any):
    harness.ray.locked = False  # e.g. an old KubeRay that drops authOptions
    harness.reconcile()
    harness.make_cluster_ready()
    status = harness.reconcile()
    assert harness.ray.submissions == []
    [attempt] = status["attempts"]
    assert attempt["result"] == "Failed" and attempt["reason"] == "HeadUnauthenticated"
    assert "answered a request without its token" in attempt["message"]
    assert status["phase"] == "Failed"  # a retry would meet the same head


def test_a_locked_head_is_submitted_to(harness: Any):
    harness.reconcile()
    harness.make_cluster_ready()
    harness.reconcile()
    assert len(harness.ray.submissions) == 1
