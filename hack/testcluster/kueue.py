"""Kueue in the local control plane: its configuration, webhook certificate and command line.

Kueue runs as a process beside KubeRay (issue 18: queueing is tested against the real
controller, not a label). Only RayClusters are integrated, and only labelled ones are managed
(manageJobsWithoutQueueName: false), so jobs without a queue never notice it. Every listener is
on 127.0.0.1. The apiserver gets no webhook configuration: kuberl creates queued RayClusters
suspended itself (what Kueue's mutating webhook would do), and the webhook server only has to
start, with a self-signed certificate instead of Kueue's in-cluster cert rotation. The
visibility API server (an aggregated apiserver on 0.0.0.0:8082) is switched off.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

KUEUE_NAMESPACE = "kueue-system"
# Kueue 0.19 reads its metrics server's certificate from this fixed path whenever its internal
# cert management is off (cmd/kueue/main.go), with no flag to move it; the file is made once per
# machine, self-signed for 127.0.0.1, and only ever serves the loopback metrics endpoint.
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
FRAMEWORKS = ("ray.io/raycluster",)


def write_config(path: Path, metrics: int, probe: int, webhook: int, cert_dir: Path) -> Path:
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "leaderElection": {"leaderElect": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{probe}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics}"},
        "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(cert_dir)},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))  # YAML is a superset of JSON
    return path


def ensure_metrics_cert(cert_dir: Path = METRICS_CERT_DIR) -> None:
    """Make the metrics certificate pair once per machine. Clusters of parallel sessions start
    at the same time: the pair is written in a private directory beside `cert_dir` and renamed
    into place, so no Kueue ever reads a half-written pair or one process's key with another's
    certificate."""
    if _has_pair(cert_dir):
        return
    try:
        cert_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".certs-", dir=cert_dir.parent))
        try:
            write_self_signed_cert(staging)
            staging.rename(cert_dir)  # atomic; fails if another process got there first
        except OSError:
            if not _has_pair(cert_dir):
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as err:
        raise RuntimeError(
            f"Kueue needs tls.crt/tls.key in {cert_dir} (a fixed path in Kueue 0.19 when "
            f"its cert management is off) and it cannot be written: {err}; create them with "
            "openssl req -x509 -nodes -newkey rsa:2048 -subj /CN=kueue-metrics there"
        ) from err


def _has_pair(cert_dir: Path) -> bool:
    return (cert_dir / "tls.crt").exists() and (cert_dir / "tls.key").exists()


def write_self_signed_cert(cert_dir: Path) -> None:
    cert_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
            "-keyout", "tls.key", "-out", "tls.crt", "-subj", "/CN=kuberl-local-kueue",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        cwd=cert_dir, check=True, capture_output=True, text=True,
    )  # fmt: skip


def kueue_argv(binary: Path, kubeconfig: Path, config: Path) -> list[str]:
    return [
        str(binary),
        f"--config={config}",
        f"--kubeconfig={kubeconfig}",
        "--feature-gates=VisibilityOnDemand=false",
        "--zap-log-level=info",
    ]
