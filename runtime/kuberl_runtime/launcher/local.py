"""Local launcher: `trainer.n_gpus_per_node` ranks on this machine (nnodes must be 1).

One rank runs in this process. More are forked from this process once it has imported what a
rank runs, the way vLLM starts its workers: torch and transformers are imported once for all
ranks instead of once per rank (seconds each). Forking is safe because this process has not
initialized an accelerator (checked before the fork: each rank initializes its own) and the only
thread it starts, the rendezvous store's, starts after the fork.

A forked rank ends as `kuberl train` would: SystemExit(code) from `launch_local`, through its
callers, to the interpreter's own exit (atexit handlers, finalization, then C++ static
destructors: vLLM's CPU backend unlinks its /dev/shm segments in one; an os._exit, as
multiprocessing ends a child, skips all of them). So nothing above `launch_local` may hold
cleanup that a rank must not run. Each rank dies with this process (PR_SET_PDEATHSIG); all are
stopped when any of them fails. As torchrun's agent does, this process hosts the ranks'
rendezvous store on a port it has already bound, so no rank has to bind a port picked earlier
(which another process may take in between); each rank reads the port from a pipe.
"""

from __future__ import annotations

import ctypes
import datetime
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable

import torch
import torch.distributed as dist

from kuberl_api.accelerators import KINDS
from kuberl_runtime.config import RunConfig

logger = logging.getLogger(__name__)


class LaunchError(RuntimeError):
    pass


def num_local_ranks(run: RunConfig) -> int:
    placement = run.plan.placement
    if placement.nnodes > 1:
        raise LaunchError(
            f"trainer.nnodes={placement.nnodes}: the local launcher runs on one machine; submit "
            "the job to a cluster (RLTrainingJob) for multi-node runs, or set trainer.nnodes=1"
        )
    return placement.n_gpus_per_node


def launch_local(run: RunConfig) -> int:
    """Run the job to completion; returns the exit code (0 when every rank succeeded)."""
    from kuberl_runtime.launcher.worker import import_rank_modules, run_worker_exit_code

    world = num_local_ranks(run)
    if world == 1:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        return run_worker_exit_code(run)
    import_rank_modules(run.plan)
    _refuse_initialized_accelerator()
    ranks, port_writers, launcher = [], [], os.getpid()
    for stream in (sys.stdout, sys.stderr):  # else each rank would write this buffer again
        stream.flush()
    for rank in range(world):
        port_reader, port_writer = os.pipe()
        pid = os.fork()
        if pid == 0:
            for fd in (port_writer, *port_writers):
                os.close(fd)
            raise SystemExit(_rank_main(run, rank, world, port_reader, launcher))
        os.close(port_reader)
        ranks.append(pid)
        port_writers.append(port_writer)
    store = _rendezvous_store(run.plan.placement.nccl_timeout)
    for port_writer in port_writers:
        os.write(port_writer, f"{store.port}\n".encode())
        os.close(port_writer)
    return _supervise(ranks)


def _refuse_initialized_accelerator() -> None:
    """A forked rank cannot use an accelerator runtime its parent initialized."""
    for name in KINDS:
        backend = getattr(torch, name, None)  # torch.npu: only once torch_npu is imported
        if name != "cpu" and backend is not None and backend.is_initialized():
            raise LaunchError(
                f"torch.{name} was initialized before the ranks were forked; a launcher must "
                "not touch the accelerator (a bug in kuberl: please report it)"
            )


def _rank_main(run: RunConfig, rank: int, world: int, port_reader: int, parent: int) -> int:
    """In a forked rank: its exit code."""
    from kuberl_runtime.launcher.worker import run_worker_exit_code

    try:
        _die_with(parent)
        with os.fdopen(port_reader) as port:
            master_port = port.readline().strip()
        if not master_port:  # the launcher failed before it had a store
            return 1
        os.environ.update(
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=master_port,
            # torch's env:// rendezvous then connects every rank, rank 0 too, as a client.
            TORCHELASTIC_USE_AGENT_STORE="True",
        )
        return run_worker_exit_code(run)
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1


def _rendezvous_store(timeout_s: int) -> dist.TCPStore:
    """The store every rank joins as a client, bound to port 0: the kernel picks a free one."""
    timeout = datetime.timedelta(seconds=timeout_s)
    return dist.TCPStore("127.0.0.1", 0, None, True, timeout, wait_for_workers=False)


def _supervise(ranks: list[int]) -> int:
    codes: dict[int, int] = {}

    def poll() -> None:
        for pid in ranks:
            if pid not in codes:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    codes[pid] = os.waitstatus_to_exitcode(status)

    def forward(signum: int, _frame: object) -> None:
        for pid in ranks:
            if pid not in codes:
                os.kill(pid, signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            poll()
            failed = [codes[pid] for pid in ranks if codes.get(pid, 0) != 0]
            if failed:
                logger.error("a rank exited with %s; stopping the others", failed[0])
                forward(signal.SIGTERM, None)
                _wait_all(ranks, codes, poll)
                return failed[0] if failed[0] > 0 else 128 - failed[0]
            if len(codes) == len(ranks):
                return 0
            time.sleep(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_all(
    ranks: list[int], codes: dict[int, int], poll: Callable[[], None], timeout_s: float = 30
) -> None:
    deadline = time.monotonic() + timeout_s
    while len(codes) < len(ranks) and time.monotonic() < deadline:
        time.sleep(0.1)
        poll()
    for pid in ranks:
        if pid not in codes:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _die_with(parent: int) -> None:
    pr_set_pdeathsig = 1
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # the launcher died before the line above
        os._exit(128 + signal.SIGKILL)
