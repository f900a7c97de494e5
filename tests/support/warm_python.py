"""`python ARGS` for the runtime tests, as processes forked from a warm interpreter.

A tiny training run or rank script spends most of its few seconds importing torch and
transformers (about 6 s of CPU per process). The runtime tests start hundreds of such
processes, so they start them from a server that has imported the CLI and everything a rank
runs once: each command is a fresh `os.fork()` of it that takes the command's argv, environment,
working directory and stdout/stderr, runs `-m MODULE` or `SCRIPT` as `__main__` the way the
interpreter does (runpy; sys.path[0] the script's directory or the working directory, then
PYTHONPATH), and exits through the normal interpreter exit (SystemExit, atexit handlers,
flushes). A command's process is a real process: its pid takes signals, it forks its own
children (the local launcher's ranks), and its exit status is the returncode (-N for signal N,
as subprocess reports it).

What differs from a fresh interpreter is only what a module reads from the environment when it
is imported: the server imports with the environment of the test process plus `BASE_ENV`, so a
command whose environment sets one of the import-time variables differently is refused (start
that one with subprocess). Tests about process start itself (the CLI's exit codes, the local
launcher's ranks, the demos, the operator's jobs) start real interpreters.

`warm_python()` starts one server per interpreter and test process on first use (`python
warm_python.py SOCKET MODULE...`, importing the MODULEs) and stops it when that process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib
import json
import os
import runpy
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BASE_ENV = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
TESTS = Path(__file__).resolve().parents[1]
IMPORT_TIME_ENV = ("HF_HUB_OFFLINE", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED")
IMPORT_TIME_PREFIXES = ("TORCH_", "PYTORCH_", "TRANSFORMERS_", "HF_", "CUDA_", "VLLM_")
PRELOAD = (
    "kuberl_cli.main",
    "kuberl_cli.train",
    "kuberl_runtime.launcher.worker",
    "kuberl_runtime.trainer.components",
    "kuberl_runtime.trainer.loop",
    "kuberl_runtime.sft.components",
    "kuberl_runtime.sft.trainer",
)


class _Replies:
    """JSON lines from the server on one connection."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self._buffer = b""

    def ready(self) -> bool:
        return b"\n" in self._buffer or bool(select.select([self.conn], [], [], 0)[0])

    def next(self, timeout: float | None = None) -> dict[str, Any]:
        self.conn.settimeout(timeout)
        while b"\n" not in self._buffer:
            chunk = self.conn.recv(4096)
            if not chunk:
                raise RuntimeError("the warm Python server closed the connection")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


class WarmProcess:
    """The part of `subprocess.Popen` the tests use (text mode), for a forked command."""

    def __init__(self, replies: _Replies, argv: list[str], stdout: Path, stderr: Path | None):
        self._replies = replies
        self.args = argv
        self.pid = int(replies.next()["pid"])
        self.returncode: int | None = None
        self._stdout, self._stderr = stdout, stderr

    def poll(self) -> int | None:
        if self.returncode is None and self._replies.ready():
            self._read_returncode(None)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self._read_returncode(timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str | None]:
        """(stdout, stderr); stderr is None when it went to stdout."""
        self.wait(timeout)
        out = self._stdout.read_text(errors="replace")
        return out, self._stderr.read_text(errors="replace") if self._stderr else None

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read_returncode(self, timeout: float | None) -> None:
        self.returncode = int(self._replies.next(timeout)["returncode"])
        self._replies.conn.close()


class WarmPython:
    """The client side: one server process, commands forked from it."""

    def __init__(self, python: str, preload: tuple[str, ...], env: dict[str, str]) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="kuberl-warm-python-"))
        self._socket = self._dir / "server.sock"
        self.env = env
        self._server = subprocess.Popen(
            [python, __file__, str(self._socket), *preload],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = self._server.stdout.readline() if self._server.stdout else ""
        if ready.strip() != "ready":
            self.close()
            raise RuntimeError(f"the warm Python server did not start: {ready!r}")
        self._count = 0

    def start(
        self,
        argv: list[str],
        env: dict[str, str],
        merge_stderr: bool = False,
        cwd: Path | None = None,
    ) -> WarmProcess:
        """`python *argv` (`-m MODULE ARGS` or `SCRIPT ARGS`) with exactly `env`."""
        self._refuse_import_time_env(env)
        self._count += 1
        stdout = self._dir / f"{self._count}.out"
        stderr = None if merge_stderr else self._dir / f"{self._count}.err"
        request = {
            "argv": argv,
            "env": env,
            "cwd": str(cwd or Path.cwd()),
            "stdout": str(stdout),
            "stderr": str(stderr) if stderr else None,
        }
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(self._socket))
        conn.sendall(json.dumps(request).encode() + b"\n")
        return WarmProcess(_Replies(conn), argv, stdout, stderr)

    def run(
        self, argv: list[str], env: dict[str, str], timeout: float, cwd: Path | None = None
    ) -> subprocess.CompletedProcess:
        """As `subprocess.run([python, *argv], capture_output=True, text=True, timeout=...)`."""
        process = self.start(argv, env, cwd=cwd)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(60)
            raise
        return subprocess.CompletedProcess(argv, process.returncode, out, err)

    def close(self) -> None:
        if self._server.poll() is None:
            self._server.kill()
            self._server.wait(30)
        for path in self._dir.iterdir():
            path.unlink()
        self._dir.rmdir()

    def _refuse_import_time_env(self, env: dict[str, str]) -> None:
        for name in sorted(set(env) | set(self.env)):
            import_time = name in IMPORT_TIME_ENV or name.startswith(IMPORT_TIME_PREFIXES)
            if import_time and env.get(name) != self.env.get(name):
                raise ValueError(
                    f"{name}={env.get(name)!r} is read when modules are imported and the warm "
                    f"Python server imported them with {self.env.get(name)!r}: start this "
                    "command with subprocess instead"
                )


def script_env(**extra: str) -> dict[str, str]:
    """The environment of a test file run as a rank script: `support` importable (tests/ on
    PYTHONPATH, as pytest's pythonpath makes it for the test itself)."""
    return {**os.environ, **BASE_ENV, "PYTHONPATH": str(TESTS), **extra}


_servers: dict[str, WarmPython] = {}


def warm_python(
    python: str = sys.executable,
    preload: tuple[str, ...] = PRELOAD,
    env: dict[str, str] | None = None,
) -> WarmPython:
    """The server of `python` (one per interpreter), started with `env` (default: this
    process's environment and BASE_ENV) on first use."""
    if python not in _servers:
        _servers[python] = WarmPython(python, preload, env or {**os.environ, **BASE_ENV})
        atexit.register(_servers[python].close)
    return _servers[python]


# The server: single-threaded, so that every fork copies a process with no other thread.


def _serve(path: str, preload: list[str]) -> None:
    for name in preload:
        importlib.import_module(name)
    parent = os.getppid()
    _die_with(parent)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    print("ready", flush=True)
    waiting: dict[int, socket.socket] = {}
    while os.getppid() == parent:
        for _ in selector.select(timeout=0.2):
            conn, _ = listener.accept()
            request = json.loads(conn.makefile("r").readline())
            pid = os.fork()
            if pid == 0:
                for sock in (listener, conn, *waiting.values()):
                    sock.close()
                selector.close()
                _command(request)  # as `python ARGV`: returns or raises SystemExit
                return
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            waiting[pid] = conn
        _report_exits(waiting)


def _report_exits(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        conn = waiting.pop(pid)
        with contextlib.suppress(OSError):  # the test went away: nothing to tell
            conn.sendall(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
            conn.sendall(b"\n")
        conn.close()


def _command(request: dict[str, Any]) -> None:
    """In the forked child: become `python ARGV`."""
    _die_with(os.getppid())
    os.chdir(request["cwd"])
    stdout = _open(request["stdout"])
    stderr = _open(request["stderr"]) if request["stderr"] else stdout
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    os.environ.clear()
    os.environ.update(request["env"])
    argv: list[str] = request["argv"]
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]  # runpy sets argv[0] to the module's file
        sys.path[0:1] = [os.getcwd(), *extra]
        sys.modules.pop(argv[1], None)  # imported by PRELOAD; `python -m` runs a fresh copy
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        sys.path[0:1] = [str(Path(argv[0]).resolve().parent), *extra]
        runpy.run_path(argv[0], run_name="__main__")


def _open(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)


def _die_with(parent: int) -> None:
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2:])
