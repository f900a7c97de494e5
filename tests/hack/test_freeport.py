"""hack/freeport.py: ports outside the kernel's ephemeral range, never the same one twice."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import freeport
import pytest

HACK = Path(__file__).resolve().parents[2] / "hack"
PICK = (
    "import sys; sys.path.insert(0, sys.argv[1]); import freeport; print(*freeport.free_ports(50))"
)


def test_ports_sit_below_the_ephemeral_and_node_port_ranges():
    ports = freeport.free_ports(20)
    assert len(set(ports)) == 20
    ceiling = min(freeport._ephemeral_low(), freeport.NODE_PORTS_LOW)
    assert all(freeport.LOW <= port < ceiling for port in ports)


def test_processes_picking_at_once_never_share_a_port():
    procs = [
        subprocess.Popen([sys.executable, "-c", PICK, str(HACK)], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    picked = [int(port) for proc in procs for port in proc.communicate(timeout=60)[0].split()]
    assert all(proc.returncode == 0 for proc in procs)
    assert len(picked) == 200 and len(set(picked)) == 200


def _sequence(monkeypatch, *ports: int) -> None:
    calls = iter(ports)
    monkeypatch.setattr(freeport.random, "randrange", lambda low, high: next(calls))


def test_a_listening_port_and_a_claimed_port_are_skipped(monkeypatch, tmp_path):
    monkeypatch.setattr(freeport, "CLAIMS", tmp_path)
    with socket.socket() as held:
        held.bind((freeport.LOOPBACK, 0))
        held.listen()
        listening = held.getsockname()[1]
        claimed, free = freeport.free_ports(2)  # bindable, both claimed in tmp_path
        (tmp_path / str(free)).unlink()
        _sequence(monkeypatch, listening, claimed, free)
        assert freeport.free_port() == free
    assert (tmp_path / str(free)).exists()


def test_an_expired_claim_is_taken_over(monkeypatch, tmp_path):
    monkeypatch.setattr(freeport, "CLAIMS", tmp_path)
    port = freeport.free_port()
    marker = tmp_path / str(port)
    _sequence(monkeypatch, port, port)
    with pytest.raises(StopIteration):  # a fresh claim is never handed out again
        freeport.free_port()
    old = time.time() - freeport.CLAIM_TTL_S - 1
    os.utime(marker, (old, old))
    _sequence(monkeypatch, port)
    assert freeport.free_port() == port
