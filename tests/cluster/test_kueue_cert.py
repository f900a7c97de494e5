"""Kueue 0.19's metrics certificate lives at one fixed path per machine; clusters of parallel
sessions start at once, and each Kueue must find a whole, matching pair there."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from testcluster.kueue import ensure_metrics_cert


def _modulus(args: list[str], path: Path) -> str:
    return subprocess.run(
        ["openssl", *args, "-noout", "-modulus", "-in", str(path)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def test_concurrent_starts_leave_one_matching_pair(tmp_path: Path) -> None:
    cert_dir = tmp_path / "etc" / "kueue" / "metrics" / "certs"
    with ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(ensure_metrics_cert, cert_dir) for _ in range(4)]:
            future.result()
    assert sorted(p.name for p in cert_dir.iterdir()) == ["tls.crt", "tls.key"]
    assert _modulus(["x509"], cert_dir / "tls.crt") == _modulus(["rsa"], cert_dir / "tls.key")
    assert [p.name for p in cert_dir.parent.iterdir()] == ["certs"], "no staging dir left behind"
    made = (cert_dir / "tls.crt").read_bytes()
    ensure_metrics_cert(cert_dir)
    assert (cert_dir / "tls.crt").read_bytes() == made, "an existing pair is kept"
