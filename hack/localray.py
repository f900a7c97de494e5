"""A local Ray head on 127.0.0.1 standing in for a RayCluster's dashboard (tests and the demo).

    head = start_head(Path("/tmp/x"), path_prefix=[shim_dir], token_auth=True)
    head.url            # http://127.0.0.1:<port>, the Ray Jobs API
    head.token          # with token_auth: what every request must carry (RAY_AUTH_MODE=token)
    head.stop()

Every port is its own free one (a second Ray on the machine must not break this one's agent),
the head runs in its own process group (stopped as a group, never by name), and its PATH starts
with `path_prefix` then this interpreter's bin/, so `kuberl` resolves to the repo's.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from freeport import free_port


@dataclass
class RayHead:
    url: str
    log: Path
    process: subprocess.Popen
    token: str | None = None

    def session_name(self) -> str | None:
        request = urllib.request.Request(self.url + "/api/version")
        if self.token:
            request.add_header("x-ray-authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=2) as response:
                return json.loads(response.read()).get("session_name")
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)  # our own group: the head and its daemons
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


def start_head(
    log_dir: Path,
    path_prefix: list[Path] | None = None,
    env: dict[str, str] | None = None,
    num_cpus: int = 2,
    timeout: float = 120,
    token_auth: bool = False,
    attempts: int = 3,
) -> RayHead:
    """Start `ray start --head --block` and wait until its node is up and its dashboard answers.

    With ``token_auth`` the head runs as kuberl's RayClusters do (RAY_AUTH_MODE=token, a fresh
    random RAY_AUTH_TOKEN): every request without ``head.token`` is refused. On a loaded machine
    the raylet sometimes aborts while its dashboard agent is still importing (after the
    dashboard already answers): such a start is retried, up to ``attempts`` times."""
    for attempt in range(1, attempts + 1):
        try:
            return _start_once(log_dir, path_prefix, env, num_cpus, timeout, token_auth)
        except HeadDied:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


class HeadDied(RuntimeError):
    """The head exited or never came up."""


def _start_once(
    log_dir: Path,
    path_prefix: list[Path] | None,
    env: dict[str, str] | None,
    num_cpus: int,
    timeout: float,
    token_auth: bool,
) -> RayHead:
    bin_dir = Path(sys.executable).parent
    dashboard, gcs, agent, agent_grpc, metrics, runtime_env = (free_port() for _ in range(6))
    temp_dir = tempfile.mkdtemp(prefix="krl", dir="/tmp")  # Ray's socket paths must stay short
    path = ":".join(str(p) for p in [*(path_prefix or []), bin_dir]) + ":" + os.environ["PATH"]
    # No drain on SIGTERM: Ray 2.60 otherwise waits up to 30 s for a node nothing else uses.
    full_env = {**os.environ, "PATH": path, "RAY_USAGE_STATS_ENABLED": "0",
                "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0", **(env or {})}  # fmt: skip
    token = secrets.token_hex(32) if token_auth else None
    if token:
        full_env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / "ray-head.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [str(bin_dir / "ray"), "start", "--head", "--block",
             "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1",
             f"--dashboard-port={dashboard}", f"--port={gcs}", f"--num-cpus={num_cpus}",
             "--disable-usage-stats", f"--temp-dir={temp_dir}",
             f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
             f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={runtime_env}"],
            env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    head = RayHead(f"http://127.0.0.1:{dashboard}", log_path, process, token)
    deadline = time.monotonic() + timeout
    while not (_node_started(log_path) and head.session_name() is not None):
        if process.poll() is not None or time.monotonic() > deadline:
            head.stop()
            tail = log_path.read_text(errors="replace")[-3000:]
            raise HeadDied(f"the local Ray head did not come up:\n{tail}")
        time.sleep(1)
    return head


def _node_started(log_path: Path) -> bool:
    """`ray start` prints this once the head node registered (raylet and agents up)."""
    return "Ray runtime started" in log_path.read_text(errors="replace")
