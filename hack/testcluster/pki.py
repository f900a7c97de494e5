"""Per-cluster credentials made with the openssl CLI: a CA, the apiserver's serving certificate,
the service-account signing key pair and a static admin token."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# The in-cluster names clients may use for the apiserver, plus loopback where it really listens.
SERVING_NAMES = (
    "IP:127.0.0.1",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
)
ADMIN_USER = "kuberl-admin"


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path
    token_file: Path
    admin_token: str


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, text=True)


def make_pki(directory: Path, service_ip: str) -> Pki:
    """Write fresh credentials into `directory`; `service_ip` is the `kubernetes` Service's IP."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl CLI is needed to make the local cluster's certificates")
    directory.mkdir(parents=True, exist_ok=True)
    days = "3650"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", days,
        "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=kuberl-local-ca",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "req", "-new", "-newkey", "rsa:2048", "-nodes",
        "-keyout", "apiserver.key", "-out", "apiserver.csr", "-subj", "/CN=kube-apiserver",
        cwd=directory,
    )  # fmt: skip
    names = ",".join((*SERVING_NAMES, f"IP:{service_ip}"))
    (directory / "apiserver.ext").write_text(
        f"subjectAltName={names}\nextendedKeyUsage=serverAuth\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
    )
    _openssl(
        "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", days, "-extfile", "apiserver.ext", "-out", "apiserver.crt",
        cwd=directory,
    )  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=directory)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=directory)

    # system:masters bypasses RBAC, which is what every local client (tests, kopf, helm) wants.
    token = secrets.token_hex(24)
    token_file = directory / "tokens.csv"
    token_file.write_text(f"{token},{ADMIN_USER},{ADMIN_USER},system:masters\n")
    token_file.chmod(0o600)
    return Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        sa_key=directory / "sa.key",
        sa_pub=directory / "sa.pub",
        token_file=token_file,
        admin_token=token,
    )
