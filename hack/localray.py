"""A local Ray head on 127.0.0.1 standing in for a RayCluster's dashboard (tests and the demo).

    head = start_head(Path("/tmp/x"), path_prefix=[shim_dir])
    head.url            # http://127.0.0.1:<port>, the Ray Jobs API
    head.stop()

Every port is its own free one (a second Ray on the machine must not break this one's agent),
the head runs in its own process group (stopped as a group, never by name), and its PATH starts
with `path_prefix` then this interpreter's bin/, so `kuberl` resolves to the repo's.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RayHead:
    url: str
    log: Path
    process: subprocess.Popen

    def session_name(self) -> str | None:
        try:
            with urllib.request.urlopen(self.url + "/api/version", timeout=2) as response:
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
) -> RayHead:
    """Start `ray start --head --block` and wait until its dashboard answers."""
    bin_dir = Path(sys.executable).parent
    dashboard, gcs, agent, agent_grpc, metrics, runtime_env = (free_port() for _ in range(6))
    temp_dir = tempfile.mkdtemp(prefix="krl", dir="/tmp")  # Ray's socket paths must stay short
    path = ":".join(str(p) for p in [*(path_prefix or []), bin_dir]) + ":" + os.environ["PATH"]
    full_env = {**os.environ, "PATH": path, "RAY_USAGE_STATS_ENABLED": "0", **(env or {})}
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
    head = RayHead(f"http://127.0.0.1:{dashboard}", log_path, process)
    deadline = time.monotonic() + timeout
    while head.session_name() is None:
        if process.poll() is not None or time.monotonic() > deadline:
            head.stop()
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the local Ray head did not come up:\n{tail}")
        time.sleep(1)
    return head
