"""An in-process stand-in for Ray heads' Jobs API on 127.0.0.1: the test decides each job's fate.

Cluster-tier tests that are about Kubernetes (Kueue admission, preemption) point the operator's
``--dashboard-url-override`` here instead of at a real Ray head: submissions are recorded, a job
is RUNNING once submitted, and ``finish`` ends it. Any token is accepted unless ``tokens`` is a
set: then only those (``x-ray-authorization: Bearer <token>``), others get 401; every request is
recorded in ``seen`` as (method, path, token, HTTP status).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from freeport import free_port


class FakeDashboard:
    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.submissions: list[str] = []
        self.stopped: list[str] = []
        self.tokens: set[str] | None = None
        self.seen: list[tuple[str, str, str, int]] = []
        self.lock = threading.Lock()
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                dashboard.handle(self, "GET")

            def do_POST(self) -> None:
                dashboard.handle(self, "POST")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def finish(self, submission_id: str, status: str = "SUCCEEDED") -> None:
        with self.lock:
            self.jobs[submission_id]["status"] = status

    def status(self, submission_id: str) -> str | None:
        with self.lock:
            return (self.jobs.get(submission_id) or {}).get("status")

    def handle(self, request: BaseHTTPRequestHandler, method: str) -> None:
        path = request.path.rstrip("/")
        length = int(request.headers.get("Content-Length") or 0)
        body = json.loads(request.rfile.read(length) or b"{}") if length else {}
        sent = request.headers.get("x-ray-authorization") or ""
        token = sent.removeprefix("Bearer ")
        with self.lock:
            if self.tokens is not None and token not in self.tokens:
                code, answer = 401, {"error": "missing or invalid token"}
            else:
                code, answer = self._route(method, path, body)
            self.seen.append((method, path, token, code))
        data = json.dumps(answer).encode()
        request.send_response(code)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _route(self, method: str, path: str, body: dict) -> tuple[int, Any]:
        if method == "GET" and path == "/api/version":
            return 200, {"version": "fake", "ray_version": "2.60.0", "session_name": "fake"}
        if method == "POST" and path == "/api/jobs":
            sid = body["submission_id"]
            if sid in self.jobs:
                return 500, {"error": "Please use a different submission_id"}
            self.submissions.append(sid)
            self.jobs[sid] = {"submission_id": sid, "status": "RUNNING",
                              "metadata": body.get("metadata") or {}, "message": ""}  # fmt: skip
            return 200, {"submission_id": sid, "job_id": sid}
        parts = path.split("/")
        if len(parts) >= 4 and parts[:3] == ["", "api", "jobs"]:
            job = self.jobs.get(parts[3])
            if job is None:
                return 404, {"error": "not found"}
            if method == "POST" and parts[4:] == ["stop"]:
                self.stopped.append(parts[3])
                job["status"] = "STOPPED"
                return 200, {"stopped": True}
            if method == "GET" and parts[4:] == ["logs"]:
                return 200, {"logs": ""}
            if method == "GET" and len(parts) == 4:
                return 200, job
        return 404, {"error": f"no route {method} {path}"}


@contextlib.contextmanager
def operator_on(
    kubeconfig: str, namespace: str, dashboard: FakeDashboard, log_path: Path, *extra: str
) -> Iterator[subprocess.Popen]:
    """``python -m kuberl_operator`` watching `namespace`, every head at `dashboard`; its log is
    printed when the test ends (shown by pytest when it failed)."""
    argv = [
        sys.executable, "-m", "kuberl_operator", "-n", namespace,
        "--poll-interval", "1", "--backoff-base", "1", "--backoff-max", "4",
        "--dashboard-url-override", dashboard.url, "--metrics-host", "127.0.0.1",
        "--metrics-port", str(free_port()),
        "--liveness", f"http://127.0.0.1:{free_port()}/healthz", *extra,
    ]  # fmt: skip
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            argv, env={**os.environ, "KUBECONFIG": kubeconfig}, stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        print("----- operator log -----\n" + log_path.read_text(errors="replace")[-6000:])
