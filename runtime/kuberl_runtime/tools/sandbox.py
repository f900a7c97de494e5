"""Running untrusted Python in a restricted subprocess (the sandboxed code tool's engine).

Each call gets a fresh working directory (mode 0700, owned by the sandbox's uid, removed after
the call), a non-root uid (the worker's own; a worker running as root drops to ``uid``/``gid``,
65534 by default), no network (``sandbox_child``: a new network namespace, or an audit hook
where the pod may not make namespaces), and limits: CPU seconds, address space, processes,
output bytes and a wall-clock timeout. The child runs in its own session; after it ends, or at
the timeout, its process group is killed by its id and waited for. Why a subprocess and not a
sidecar: docs/security.md.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from kuberl_runtime.tools.base import ToolError

logger = logging.getLogger(__name__)

NetworkIsolation = Literal["auto", "namespace", "audit"]
ISOLATIONS = ("auto", "namespace", "audit")
NOBODY = 65534
EXIT_ISOLATION_REFUSED = 97
EXIT_AUDIT_REFUSED = 98
KILL_WAIT_ROUNDS = 100
CHILD_SOURCE = Path(__file__).with_name("sandbox_child.py")


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 10.0
    cpu_s: int = 5
    memory_mb: int = 1024
    max_processes: int = 16
    output_bytes: int = 65536
    network_isolation: NetworkIsolation = "auto"
    python: str = sys.executable
    uid: int = NOBODY
    gid: int = NOBODY

    @classmethod
    def from_config(cls, config: dict[str, Any], where: str) -> SandboxLimits:
        """The limits a tool config's ``config:`` mapping sets; unknown keys are refused."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(config) - known - {"type"})
        if unknown:
            raise ToolError(f"{where}: config keys {unknown} unknown; known: {sorted(known)}")
        limits = cls(**{k: v for k, v in config.items() if k in known})
        if limits.network_isolation not in ISOLATIONS:
            raise ToolError(
                f"{where}: config.network_isolation={limits.network_isolation!r}; write one of "
                f"{list(ISOLATIONS)}"
            )
        for key in ("timeout_s", "cpu_s", "memory_mb", "max_processes", "output_bytes"):
            if not getattr(limits, key) > 0:
                raise ToolError(
                    f"{where}: config.{key}={getattr(limits, key)!r}; write a number > 0"
                )
        if 0 in (limits.uid, limits.gid):
            raise ToolError(f"{where}: config.uid/gid=0 (root); write a non-root id such as 65534")
        return limits


@dataclass(frozen=True)
class SandboxResult:
    exit_code: int
    stdout: str
    stderr: str
    isolation: str
    failure: str | None
    """Why the program did not succeed (a limit, a refusal, its exit code); None when it did."""


def run_code(code: str, limits: SandboxLimits) -> SandboxResult:
    """``code`` run as ``main.py`` in a fresh directory under ``limits``; nothing left after."""
    uid, gid = _identity(limits)
    workdir = Path(tempfile.mkdtemp(prefix="kuberl-sandbox-"))
    try:
        (workdir / "main.py").write_text(code)
        if os.geteuid() == 0:
            for path in (workdir, workdir / "main.py"):
                os.chown(path, uid, gid)
        return _run_in(workdir, limits, uid, gid)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _identity(limits: SandboxLimits) -> tuple[int, int]:
    if os.geteuid() == 0:
        return limits.uid, limits.gid
    return os.getuid(), os.getgid()


def _run_in(workdir: Path, limits: SandboxLimits, uid: int, gid: int) -> SandboxResult:
    child_limits = {
        **asdict(limits),
        "memory_bytes": limits.memory_mb * 2**20,
        "nproc": tasks_of_uid(uid) + limits.max_processes,
    }
    command = [limits.python, "-I", "-c", CHILD_SOURCE.read_text(), json.dumps(child_limits)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8"}
    env |= {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PYTHONIOENCODING": "utf-8"}
    drop: dict[str, Any] = {"user": uid, "group": gid, "extra_groups": []}
    # Output goes to files opened here and read back through these descriptors, so what the
    # program does to its directory (a symlink in their place) cannot change what is read.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            **(drop if os.geteuid() == 0 else {}),
        )
        timed_out = _wait(process, limits.timeout_s)
        stdout = _read(out, limits.output_bytes)
        isolation, stderr = _split_isolation(_read(err, limits.output_bytes))
    code = process.returncode
    failure = _failure(code, stderr, limits, timed_out)
    return SandboxResult(code, stdout, stderr, isolation, failure)


def _wait(process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """True when the wall-clock limit killed it; the whole process group is gone either way."""
    try:
        process.wait(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    kill_group(process.pid)
    process.wait()
    return timed_out


def kill_group(pgid: int) -> None:
    """SIGKILL to the process group ``pgid``, repeated until none of it is alive (bounded)."""
    for _ in range(KILL_WAIT_ROUNDS):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        if not live_members(pgid):
            return
        time.sleep(0.01)
    logger.warning("sandbox process group %d still has members %s", pgid, live_members(pgid))


def live_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that are not zombies."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def tasks_of_uid(uid: int) -> int:
    """Threads whose real uid is ``uid`` (what RLIMIT_NPROC counts)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                count += len(os.listdir(Path(entry.path, "task")))
        except OSError:
            continue
    return count


def _failure(code: int, stderr: str, limits: SandboxLimits, timed_out: bool) -> str | None:
    if timed_out:
        return f"wall-clock limit of {limits.timeout_s}s exceeded (killed)"
    if code == 0:
        return None
    if code in (128 + signal.SIGXCPU, 128 + signal.SIGKILL, -signal.SIGXCPU, -signal.SIGKILL):
        return f"CPU limit of {limits.cpu_s}s exceeded (killed)"
    if "MemoryError" in stderr:
        return f"memory limit of {limits.memory_mb} MB exceeded"
    if "BlockingIOError" in stderr and "Resource temporarily unavailable" in stderr:
        return f"process limit exceeded (at most {limits.max_processes} processes)"
    if "Network is unreachable" in stderr or "sandbox: socket." in stderr:
        return "network access refused: the sandbox has no network"
    if code in (EXIT_ISOLATION_REFUSED, EXIT_AUDIT_REFUSED):
        return "refused by the sandbox: " + (stderr.strip().splitlines() or ["?"])[-1]
    return f"exit code {code}"


def _split_isolation(stderr: str) -> tuple[str, str]:
    first, _, rest = stderr.partition("\n")
    if first.startswith("isolation="):
        return first.removeprefix("isolation="), rest
    return "none", stderr


def _read(file: Any, limit: int) -> str:
    file.seek(0)
    return file.read(limit).decode("utf-8", errors="replace")
