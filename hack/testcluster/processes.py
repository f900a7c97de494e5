"""Start control-plane processes, each with its own log; stop exactly those PIDs, never by name."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from testcluster.state import ProcessRecord

# Popen handles of processes this interpreter started, so stopping one also reaps it (no zombie,
# no "subprocess is still running" warning). Processes started by another `up` are found by PID.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def start_ticks(pid: int) -> int | None:
    """The process's start time from /proc, or None when no such process is alive."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces; every field after its closing paren is plain.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # exited, waiting to be reaped: as good as gone
        return None
    return int(fields[19])


def is_running(record: ProcessRecord) -> bool:
    _reap(record.pid)
    return start_ticks(record.pid) == record.start_ticks


def start_process(
    name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None
) -> ProcessRecord:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        # A new session keeps a Ctrl-C in the terminal that ran `up` from reaching the cluster.
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    _CHILDREN[process.pid] = process
    ticks = start_ticks(process.pid)
    if ticks is None:
        raise RuntimeError(f"{name} exited at once; see {log_path}")
    return ProcessRecord(
        name=name, pid=process.pid, start_ticks=ticks, log=str(log_path), argv=list(argv)
    )


def stop_process(record: ProcessRecord, grace_seconds: float = 10.0) -> None:
    """SIGTERM, wait up to `grace_seconds`, then SIGKILL; a no-op if it is already gone."""
    for sig, wait_seconds in ((signal.SIGTERM, grace_seconds), (signal.SIGKILL, 5.0)):
        if not is_running(record):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, sig)
        deadline = time.monotonic() + wait_seconds
        while time.monotonic() < deadline and is_running(record):
            time.sleep(0.05)
    if is_running(record):
        raise RuntimeError(f"{record.name} (pid {record.pid}) survived SIGKILL")


def _reap(pid: int) -> None:
    process = _CHILDREN.get(pid)
    if process is not None and process.poll() is not None:
        del _CHILDREN[pid]
