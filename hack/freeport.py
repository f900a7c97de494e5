"""Free TCP ports on 127.0.0.1 for the servers tests and the local cluster start, without a race.

A port from ``bind(0)`` comes from the kernel's ephemeral range, the range outgoing connections
take their source ports from: between closing the probe socket and the server binding the port,
any client on the machine (kubectl, a watch, Ray, a second pytest lane) can take it. Ports here
come from below that range (and below Kubernetes' NodePort range, 30000-32767), where the kernel
hands out nothing on its own, and a claim file per
port (created exclusively, in one directory per user) keeps two pickers in different processes
from returning the same port. Claims expire after ``CLAIM_TTL_S``.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import tempfile
import time
from pathlib import Path

LOOPBACK = "127.0.0.1"
LOW = 20000
NODE_PORTS_LOW = 30000
CLAIM_TTL_S = 2 * 3600
MAX_TRIES = 2000
CLAIMS = Path(tempfile.gettempdir()) / f"kuberl-ports-{os.getuid()}"


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def _claim(port: int) -> bool:
    marker = CLAIMS / str(port)
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as err:
        if err.errno != errno.EEXIST:
            raise
        try:
            if time.time() - marker.stat().st_mtime < CLAIM_TTL_S:
                return False
            marker.unlink()  # an expired claim: take it over
        except FileNotFoundError:
            pass
        return _claim(port) if not marker.exists() else False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def free_port() -> int:
    """A port on 127.0.0.1 no other picker holds and nothing listens on."""
    CLAIMS.mkdir(mode=0o700, exist_ok=True)
    high = min(_ephemeral_low(), NODE_PORTS_LOW)
    for _ in range(MAX_TRIES):
        port = random.randrange(LOW, high)
        if _bindable(port) and _claim(port):
            return port
    raise RuntimeError(f"no free port in [{LOW}, {high}) after {MAX_TRIES} tries")


def free_ports(count: int) -> list[int]:
    return [free_port() for _ in range(count)]
