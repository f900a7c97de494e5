"""Scale: the phase gauge, finished jobs off the timer, and unreachable heads starving no one."""

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kuberl_operator.handlers import needs_polling
from kuberl_operator.metrics import PHASES, Metrics
from kuberl_operator.ray_gateway import RayGateway
from kuberl_operator.ray_jobs import DashboardUnavailable, RayJobsClient


def _gauge(metrics: Metrics) -> dict[str, float]:
    return {phase: metrics.jobs.labels(phase)._value.get() for phase in PHASES}


def test_the_phase_gauge_follows_every_transition():
    metrics = Metrics()
    for uid in range(1000):
        metrics.observe_phase(str(uid), "Pending")
    for uid in range(600):
        metrics.observe_phase(str(uid), "Running")
        metrics.observe_phase(str(uid), "Running")  # a repeat changes nothing
    for uid in range(100):
        metrics.observe_phase(str(uid), "Succeeded")
    metrics.forget("0", "ns", "job-0")
    metrics.forget("999", "ns", "job-999")
    metrics.forget("never-seen", "ns", "x")
    gauge = _gauge(metrics)
    assert gauge["Pending"] == 399 and gauge["Running"] == 500 and gauge["Succeeded"] == 99
    assert sum(gauge.values()) == 998


def _failed(reason: str) -> dict[str, str]:
    return {"type": "Failed", "status": "True", "reason": reason}


@pytest.mark.parametrize(
    ("status", "spec", "polled"),
    [
        ({}, {}, True),
        ({"phase": "Running"}, {}, True),
        ({"phase": "Suspended"}, {}, True),
        ({"phase": "Succeeded"}, {}, False),
        ({"phase": "Failed", "conditions": [_failed("AppFailed")]}, {}, False),
        ({"phase": "Succeeded"}, {"runPolicy": {"ttlSecondsAfterFinished": 60}}, True),
        ({"phase": "Failed", "conditions": [_failed("InvalidSpec")]}, {}, True),
    ],
)
def test_finished_jobs_leave_the_timer_unless_a_ttl_is_pending(status, spec, polled):
    assert needs_polling(spec=spec, status=status) is polled


# --- unreachable heads -----------------------------------------------------------------------


class _Head(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"session_name": "s1", "status": "RUNNING", "submission_id": "j"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def good_head() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Head)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def black_holes() -> Iterator[list[str]]:
    """Heads that accept connections and never answer (until the test ends)."""
    listeners = []
    for _ in range(4):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        listeners.append(sock)
    yield [f"http://127.0.0.1:{s.getsockname()[1]}" for s in listeners]
    for sock in listeners:
        sock.close()


def _poll(client) -> str:
    """What one reconcile asks a head: its session, then the job."""
    try:
        client.session_name()
        client.get("j")
        return "ok"
    except DashboardUnavailable:
        return "unavailable"


def test_black_holed_heads_do_not_starve_the_others(good_head, black_holes):
    """Two worker threads (kopf's pool, shrunk) reconcile 4 jobs whose heads never answer and
    12 healthy ones, three rounds. The socket timeout is long (60 s): without the gateway the
    healthy jobs queue behind the hung calls; with it every healthy poll is answered while the
    hung ones are still hanging."""
    gateway = RayGateway(call_timeout=0.5, cooldown=300)
    factory = gateway.wrap(lambda url: RayJobsClient(url, timeout=60))
    workers = ThreadPoolExecutor(max_workers=2)
    heads = (black_holes + [good_head] * 3) * 3
    futures = [workers.submit(_poll, factory(url)) for url in heads]
    good = [f for f, url in zip(futures, heads, strict=True) if url == good_head]
    deadline = time.monotonic() + 30  # far below the 60 s the hung calls hold a thread
    while not all(f.done() for f in good) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(f.done() for f in good), "healthy heads starved behind unreachable ones"
    assert {f.result() for f in good} == {"ok"}
    bad = [f.result(timeout=30) for f, url in zip(futures, heads, strict=True) if url != good_head]
    assert set(bad) == {"unavailable"}
    workers.shutdown(wait=False)
    gateway.shutdown()


def test_a_hung_head_is_asked_once_at_a_time(black_holes):
    gateway = RayGateway(call_timeout=0.2, cooldown=300)
    client = gateway.wrap(lambda url: RayJobsClient(url, timeout=60))(black_holes[0])
    with pytest.raises(DashboardUnavailable, match="within"):
        client.session_name()
    with pytest.raises(DashboardUnavailable, match="still waiting"):
        client.get("j")  # no second thread parked on the same head
    gateway.shutdown()


def test_fast_refusals_trip_no_guard():
    calls = []

    class Refusing:
        def session_name(self):
            calls.append(1)
            raise DashboardUnavailable("connection refused")

    gateway = RayGateway(call_timeout=1, cooldown=300)
    client = gateway.wrap(lambda url: Refusing())("http://127.0.0.1:1")
    for _ in range(3):
        with pytest.raises(DashboardUnavailable, match="refused"):
            client.session_name()
    assert len(calls) == 3
    gateway.shutdown()
