"""A real S3-compatible server for the tests: SeaweedFS (`weed server -s3`) on 127.0.0.1.

Built by hack/cluster-bin.sh through the Go module proxy; every listener (master, volume, filer,
S3, and each one's gRPC port) gets a free loopback port from hack/freeport.py, and the optional
ones (Iceberg, Lance, metrics, telemetry) are off, so nothing leaves the machine. One identity
with fresh random keys is allowed everything; the server is stopped by its PID.
"""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from freeport import LOOPBACK, free_ports

from testcluster.binaries import cache_root, read_versions
from testcluster.processes import start_process, stop_process
from testcluster.state import ProcessRecord

READY_TIMEOUT_S = 120.0


class SeaweedFSMissingError(RuntimeError):
    """The weed binary is not built; the message says how to build it."""


def weed_binary(root: Path | None = None) -> Path:
    version = read_versions()["SEAWEEDFS_VERSION"]
    path = (root or cache_root()) / "bin" / f"seaweedfs-{version}" / "weed"
    if not path.is_file():
        raise SeaweedFSMissingError(
            f"SeaweedFS is not built: {path} is missing; run `make cluster-bin` "
            "(hack/cluster-bin.sh builds it through the Go module proxy)"
        )
    return path


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    access_key: str
    secret_key: str
    region: str
    process: ProcessRecord
    data_dir: Path

    def env(self) -> dict[str, str]:
        """The environment a client (s3fs, boto3, a rank) reads its credentials from."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_REGION": self.region,
        }

    def stop(self) -> None:
        stop_process(self.process)


def _identity_config(path: Path, access_key: str, secret_key: str) -> None:
    config = {
        "identities": [
            {
                "name": "kuberl-tests",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)


def start_s3_server(work_dir: Path) -> S3Server:
    """Start SeaweedFS under ``work_dir`` (data, config, log) and wait until S3 answers."""
    weed = weed_binary()
    data = work_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    access_key, secret_key = "kuberl" + secrets.token_hex(6), secrets.token_hex(20)
    config = work_dir / "s3-identities.json"
    _identity_config(config, access_key, secret_key)
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = free_ports(8)
    argv = [
        str(weed),
        "server",
        f"-dir={data}",
        f"-ip={LOOPBACK}",
        f"-ip.bind={LOOPBACK}",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        "-master.telemetry=false",
        "-master.volumeSizeLimitMB=64",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        "-volume.max=0",
        "-volume.minFreeSpace=256MiB",
        "-filer",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-filer.localSocket={work_dir / 'filer.sock'}",
        "-s3",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={config}",
        f"-s3.localSocket={work_dir / 's3.sock'}",
    ]
    process = start_process("seaweedfs", argv, work_dir / "weed.log")
    endpoint = f"http://{LOOPBACK}:{s3}"
    try:
        _wait_ready(endpoint, process, work_dir / "weed.log")
    except BaseException:
        stop_process(process)
        raise
    return S3Server(endpoint, access_key, secret_key, "us-east-1", process, data)


def _wait_ready(endpoint: str, process: ProcessRecord, log: Path) -> None:
    """Until the S3 port answers HTTP (any status: an unsigned request is refused with 403)."""
    from testcluster.processes import is_running

    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if not is_running(process):
            raise RuntimeError(f"SeaweedFS exited during start-up; see {log}")
        try:
            urllib.request.urlopen(endpoint, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return
        except (TimeoutError, urllib.error.URLError, ConnectionError):
            time.sleep(0.5)
    raise RuntimeError(f"SeaweedFS S3 at {endpoint} not ready in {READY_TIMEOUT_S:.0f}s; see {log}")
