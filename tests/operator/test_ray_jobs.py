"""The Ray Jobs REST client against a loopback HTTP server speaking the dashboard's JSON."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from kuberl_operator.ray_jobs import (
    DashboardUnavailable,
    RayJobsClient,
    SubmissionRejected,
)


class FakeDashboard(BaseHTTPRequestHandler):
    jobs: ClassVar[dict[str, dict[str, Any]]] = {}
    requests: ClassVar[list[tuple[str, str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: Any) -> None:
        raw = (json.dumps(body) if not isinstance(body, str) else body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        self.requests.append(("GET", self.path, None))
        parts = self.path.strip("/").split("/")
        if self.path == "/api/version":
            return self._reply(
                200,
                {
                    "version": "4",
                    "ray_version": "2.60.0",
                    "ray_commit": "abc",
                    "session_name": "session_2026-11-01_12-00-00_000000_1",
                },
            )
        sid = parts[2] if len(parts) > 2 else ""
        if sid not in self.jobs:
            return self._reply(404, f"Job {sid} does not exist")
        if parts[-1] == "logs":
            return self._reply(200, {"logs": "line 1\nline 2\nTraceback: boom\n"})
        return self._reply(200, self.jobs[sid])

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        self.requests.append(("POST", self.path, body))
        if self.path == "/api/jobs/":
            sid = body["submission_id"]
            if sid in self.jobs:
                message = (
                    f"Job with submission_id {sid} already exists. "
                    "Please use a different submission_id."
                )
                return self._reply(
                    500, f"Traceback (most recent call last):\nValueError: {message}"
                )
            if not body.get("entrypoint"):
                return self._reply(400, "TypeError: entrypoint is required")
            self.jobs[sid] = {
                "type": "SUBMISSION",
                "job_id": None,
                "submission_id": sid,
                "driver_info": None,
                "status": "PENDING",
                "entrypoint": body["entrypoint"],
                "message": "Job has not started yet.",
                "error_type": None,
                "start_time": 1761998400000,
                "end_time": None,
                "metadata": body.get("metadata") or {},
                "runtime_env": body.get("runtime_env") or {},
                "driver_agent_http_address": None,
                "driver_node_id": None,
                "driver_exit_code": None,
            }
            return self._reply(200, {"job_id": "raysubmit_1", "submission_id": sid})
        sid = self.path.strip("/").split("/")[2]
        if sid not in self.jobs:
            return self._reply(404, f"Job {sid} does not exist")
        stopped = self.jobs[sid]["status"] in ("PENDING", "RUNNING")
        self.jobs[sid]["status"] = "STOPPED"
        return self._reply(200, {"stopped": stopped})


@pytest.fixture
def dashboard() -> Iterator[str]:
    FakeDashboard.jobs, FakeDashboard.requests = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeDashboard)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


PAYLOAD = {
    "entrypoint": "kuberl train /x.yaml",
    "submission_id": "grpo-1",
    "runtime_env": {"env_vars": {"A": "1"}},
    "metadata": {"kuberl.io/job": "grpo"},
}


def test_submit_then_status_and_logs(dashboard):
    client = RayJobsClient(dashboard)
    assert client.submit(PAYLOAD) == "grpo-1"
    assert FakeDashboard.requests[-1] == ("POST", "/api/jobs/", PAYLOAD)
    info = client.get("grpo-1")
    assert info is not None
    assert (info.status, info.metadata, info.terminal) == (
        "PENDING",
        {"kuberl.io/job": "grpo"},
        False,
    )
    assert client.logs_tail("grpo-1", max_chars=16).endswith("Traceback: boom\n")


def test_reused_submission_id_counts_as_submitted(dashboard):
    client = RayJobsClient(dashboard)
    client.submit(PAYLOAD)
    assert client.submit(PAYLOAD) == "grpo-1"
    assert len(FakeDashboard.jobs) == 1


def test_rejected_submission_raises(dashboard):
    with pytest.raises(SubmissionRejected):
        RayJobsClient(dashboard).submit({**PAYLOAD, "entrypoint": ""})


def test_unknown_job_is_none(dashboard):
    assert RayJobsClient(dashboard).get("nope") is None


def test_stop(dashboard):
    client = RayJobsClient(dashboard)
    client.submit(PAYLOAD)
    assert client.stop("grpo-1") is True
    assert client.get("grpo-1").status == "STOPPED"
    assert client.stop("grpo-1") is False
    assert client.stop("nope") is False


def test_session_name(dashboard):
    assert RayJobsClient(dashboard).session_name().startswith("session_")


def test_unreachable_dashboard_raises():
    with pytest.raises(DashboardUnavailable):
        RayJobsClient("http://127.0.0.1:9", timeout=1).get("grpo-1")
