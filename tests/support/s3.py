"""Pytest fixtures around the real S3 server (SeaweedFS on 127.0.0.1, hack/testcluster/s3server.py).

`s3_server` starts one server per session and stops it by PID; `s3_bucket` makes a fresh bucket
per test, so tests never see each other's objects. A test module uses them with
`from support.s3 import s3_bucket, s3_server  # noqa: F401` (pytest finds fixtures by name).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from testcluster.s3server import S3Server, start_s3_server


def s3fs_for(server: S3Server, secret_key: str | None = None) -> Any:
    """An s3fs filesystem speaking to ``server`` (with another secret key, when given)."""
    import s3fs

    return s3fs.S3FileSystem(
        key=server.access_key,
        secret=secret_key or server.secret_key,
        endpoint_url=server.endpoint_url,
        client_kwargs={"region_name": server.region},
        config_kwargs={"retries": {"max_attempts": 1}},
        skip_instance_cache=True,
    )


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    server = start_s3_server(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server) -> str:
    """A new, empty bucket's name (the S3 gateway may need a moment after start to accept one)."""
    name = f"kuberl-{secrets.token_hex(4)}"
    fs = s3fs_for(s3_server)
    deadline = time.monotonic() + 60
    while True:
        try:
            fs.mkdir(name)
            return name
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
