"""Local launcher: `trainer.n_gpus_per_node` ranks on this machine (nnodes must be 1).

One rank runs in this process. More are forked from this process once it has imported what a
rank runs, the way vLLM starts its workers: torch and transformers are imported once for all
ranks instead of once per rank (seconds each). Forking is safe because this process has not
initialized an accelerator (checked before the fork: each rank initializes its own) and the only
thread it starts, the rendezvous store's, starts after the fork. Each rank dies with this process
(PR_SET_PDEATHSIG); all are stopped when any of them fails. As torchrun's agent does, this
process hosts the ranks' rendezvous store on a port it has already bound, so no rank has to bind
a port picked earlier (which another process may take in between); each rank reads the port from
a pipe.
"""

from __future__ import annotations

import ctypes
import datetime
import logging
import multiprocessing
import os
import signal
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

import torch
import torch.distributed as dist

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
    context = multiprocessing.get_context("fork")
    ranks, ports = [], []
    for rank in range(world):
        port_reader, port_writer = context.Pipe(duplex=False)
        process = context.Process(
            target=_rank_main,
            args=(run, rank, world, port_reader, os.getpid()),
            name=f"rank-{rank}",
        )
        process.start()
        port_reader.close()
        ranks.append(process)
        ports.append(port_writer)
    store = _rendezvous_store(run.plan.placement.nccl_timeout)
    for port_writer in ports:
        port_writer.send(store.port)
        port_writer.close()
    return _supervise(ranks)


def _refuse_initialized_accelerator() -> None:
    """A forked rank cannot use an accelerator runtime its parent initialized."""
    for name in ("cuda", "npu", "xpu"):
        backend = getattr(torch, name, None)
        if backend is not None and backend.is_initialized():
            raise LaunchError(
                f"torch.{name} was initialized before the ranks were forked; a launcher must "
                "not touch the accelerator (a bug in kuberl: please report it)"
            )


def _rank_main(run: RunConfig, rank: int, world: int, port: Connection, parent: int) -> None:
    from kuberl_runtime.launcher.worker import run_worker_exit_code

    _die_with_parent(parent)
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port.recv()),
        # torch's env:// rendezvous then connects every rank, rank 0 too, as a client.
        TORCHELASTIC_USE_AGENT_STORE="True",
    )
    port.close()
    sys.exit(run_worker_exit_code(run))


def _rendezvous_store(timeout_s: int) -> dist.TCPStore:
    """The store every rank joins as a client, bound to port 0: the kernel picks a free one."""
    timeout = datetime.timedelta(seconds=timeout_s)
    return dist.TCPStore("127.0.0.1", 0, None, True, timeout, wait_for_workers=False)


def _supervise(ranks: list[BaseProcess]) -> int:
    def forward(signum: int, _frame: object) -> None:
        for rank in ranks:
            if rank.exitcode is None and rank.pid is not None:
                os.kill(rank.pid, signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            codes = [rank.exitcode for rank in ranks]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                logger.error("a rank exited with %s; stopping the others", failed[0])
                forward(signal.SIGTERM, None)
                _wait_all(ranks)
                return failed[0] if failed[0] > 0 else 128 - failed[0]
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_all(ranks: list[BaseProcess], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    for rank in ranks:
        rank.join(timeout=max(0.1, deadline - time.monotonic()))
        if rank.exitcode is None:
            rank.kill()
            rank.join()


def _die_with_parent(parent: int) -> None:
    pr_set_pdeathsig = 1
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # the launcher died before the line above
        os._exit(128 + signal.SIGKILL)
