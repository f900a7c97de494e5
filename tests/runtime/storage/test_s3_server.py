"""The test harness's S3 server: real SeaweedFS on loopback, with credentials, stopped by PID."""

from __future__ import annotations

from pathlib import Path

import pytest
from testcluster.processes import is_running
from testcluster.s3server import start_s3_server

from support.s3 import s3fs_for

pytestmark = pytest.mark.runtime

LOOPBACK_V4 = "0100007F"  # 127.0.0.1 as /proc/net/tcp writes it
LOOPBACK_V6 = ("00000000000000000000000001000000", "0000000000000000FFFF00000100007F")


def listening_addresses(pid: int) -> list[str]:
    """The local addresses of every TCP socket ``pid`` listens on (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    addresses = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                addresses.append(fields[1].split(":")[0])
    return addresses


def test_objects_round_trip_with_the_servers_credentials(s3_server, s3_bucket):
    fs = s3fs_for(s3_server)
    fs.pipe(f"{s3_bucket}/dir/hello.txt", b"hello")
    assert fs.cat_file(f"{s3_bucket}/dir/hello.txt") == b"hello"
    assert fs.ls(f"{s3_bucket}/dir", detail=False) == [f"{s3_bucket}/dir/hello.txt"]


def test_a_wrong_secret_is_refused(s3_server, s3_bucket):
    with pytest.raises(PermissionError):
        s3fs_for(s3_server, secret_key="not-the-secret").ls(s3_bucket)


def test_every_listener_is_on_loopback(s3_server):
    addresses = listening_addresses(s3_server.process.pid)
    assert len(addresses) >= 4  # master, volume, filer, S3, and their gRPC ports
    assert all(a == LOOPBACK_V4 or a in LOOPBACK_V6 for a in addresses), addresses


def test_stop_ends_the_process(tmp_path):
    server = start_s3_server(tmp_path)
    assert is_running(server.process)
    server.stop()
    assert not is_running(server.process)
