"""The sandbox's child, run as ``python -I -c <this file's source> <limits JSON>``.

It starts as the sandbox's non-root uid (the parent's ``Popen(user=...)`` dropped it) in the
call's fresh working directory, then:

1. isolates: a new user, network and PID namespace (``unshare``; permitted to non-root where
   the kernel and the pod's seccomp profile allow user namespaces). The network namespace
   has only a loopback that is down: no socket reaches anything. In the PID namespace an init of
   ours (never user code) waits for the program; when it dies the kernel kills every process
   left in the namespace, so a killed call leaves nothing behind;
2. sets the limits (``setrlimit``): CPU seconds, address space, processes, file size, files;
3. runs ``main.py``: in the namespaces after an ``execve`` (which drops the namespace's
   capabilities: the uid inside is not 0); without namespaces (network_isolation ``audit``, or
   ``auto`` where ``unshare`` is refused) in this process under an audit hook that refuses
   sockets, ``ctypes``, fork, exec and subprocesses: one process, killed by its PID.

Stdlib only: it must run in any interpreter of the job's image.
"""

import ctypes
import json
import os
import resource
import runpy
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000
EXIT_ISOLATION_REFUSED = 97
EXIT_AUDIT_REFUSED = 98
REFUSED_EVENTS = (
    "socket.",
    "ctypes.",
    "subprocess.",
    "os.fork",
    "os.forkpty",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.system",
    "os.kill",
    "os.killpg",
    "pty.",
)
REFUSED_IMPORTS = frozenset({"_posixsubprocess", "_ctypes", "ctypes"})


def unshare_namespaces() -> str | None:
    """None once in new user, network and PID namespaces; else why not."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID) != 0:
        return os.strerror(ctypes.get_errno())
    for path, text in (
        ("/proc/self/setgroups", "deny"),
        ("/proc/self/uid_map", f"{uid} {uid} 1"),
        ("/proc/self/gid_map", f"{gid} {gid} 1"),
    ):
        with open(path, "w") as file:
            file.write(text)
    return None


def set_limits(limits: dict) -> None:
    cpu = int(limits["cpu_s"])
    memory = int(limits["memory_bytes"])
    output = int(limits["output_bytes"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_NPROC, (int(limits["nproc"]), int(limits["nproc"])))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def exit_code(status: int) -> int:
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def run_init(python: str) -> None:
    """PID 1 of the namespace: fork the program, reap every child until it ends, exit as it
    did (the kernel then kills whatever it left)."""
    program = os.fork()
    if program == 0:
        os.execv(python, [python, "-I", "main.py"])
    while True:
        pid, status = os.wait()
        if pid == program:
            os._exit(exit_code(status))


def run_isolated(python: str) -> None:
    init = os.fork()
    if init == 0:
        try:
            run_init(python)
        finally:
            os._exit(EXIT_ISOLATION_REFUSED)
    _, status = os.waitpid(init, 0)
    sys.exit(exit_code(status))


def audit(event: str, args: tuple) -> None:
    if event.startswith(REFUSED_EVENTS):
        raise PermissionError(f"sandbox: {event} is not permitted")
    if event == "import" and args and args[0] in REFUSED_IMPORTS:
        raise ImportError(f"sandbox: import {args[0]} is not permitted")
    path = args[0] if event == "open" and args else None
    if isinstance(path, str) and path.startswith("/proc/") and path.endswith("/mem"):
        raise PermissionError("sandbox: process memory is not accessible")


def run_audited() -> None:
    sys.addaudithook(audit)
    try:
        runpy.run_path("main.py", run_name="__main__")
    except (PermissionError, ImportError) as err:
        if str(err).startswith("sandbox:"):
            print(f"{type(err).__name__}: {err}", file=sys.stderr)
            sys.exit(EXIT_AUDIT_REFUSED)
        raise


def main() -> None:
    limits = json.loads(sys.argv[1])
    mode = limits["network_isolation"]
    if os.getuid() == 0:
        print("sandbox: refusing to run user code as root", file=sys.stderr)
        sys.exit(EXIT_ISOLATION_REFUSED)
    why = unshare_namespaces() if mode in ("namespace", "auto") else "not asked for"
    if why is not None and mode == "namespace":
        print(f"sandbox: no network namespace: unshare refused ({why})", file=sys.stderr)
        sys.exit(EXIT_ISOLATION_REFUSED)
    print(f"isolation={'audit' if why else 'namespace'}", file=sys.stderr, flush=True)
    set_limits(limits)
    if why is None:
        run_isolated(limits["python"])
    run_audited()


if __name__ == "__main__":
    main()
