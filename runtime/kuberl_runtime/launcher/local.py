"""Local launcher: `trainer.n_gpus_per_node` ranks on this machine (nnodes must be 1).

One rank runs in this process; more run as child processes of this one, each told its rank by
env vars, that die with it (PR_SET_PDEATHSIG) and are stopped when any of them fails. As torchrun's
agent does, this process hosts the ranks' rendezvous store on a port it has already bound, so no
rank has to bind a port picked earlier (which another process may take in between).
"""

from __future__ import annotations

import ctypes
import datetime
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    world = num_local_ranks(run)
    if world == 1:
        from kuberl_runtime.launcher.worker import run_worker_exit_code

        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
        return run_worker_exit_code(run)
    with tempfile.TemporaryDirectory(prefix="kuberl-run-") as tmp:
        config_path = Path(tmp) / "run.json"
        config_path.write_text(run.to_json())
        store = _rendezvous_store(run.plan.placement.nccl_timeout)
        return _supervise(_spawn(world, config_path, store.port))


def _rendezvous_store(timeout_s: int) -> dist.TCPStore:
    """The store every rank joins as a client, bound to port 0: the kernel picks a free one."""
    timeout = datetime.timedelta(seconds=timeout_s)
    return dist.TCPStore("127.0.0.1", 0, None, True, timeout, wait_for_workers=False)


def _spawn(world: int, config_path: Path, port: int) -> list[subprocess.Popen]:
    procs = []
    for rank in range(world):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            # torch's env:// rendezvous then connects every rank, rank 0 too, as a client.
            "TORCHELASTIC_USE_AGENT_STORE": "True",
        }
        cmd = [sys.executable, "-m", "kuberl_runtime.launcher.worker", str(config_path)]
        procs.append(subprocess.Popen(cmd, env=env, preexec_fn=_die_with_parent))
    return procs


def _supervise(procs: list[subprocess.Popen]) -> int:
    def forward(signum: int, _frame: object) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while True:
            codes = [proc.poll() for proc in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                logger.error("a rank exited with %s; stopping the others", failed[0])
                forward(signal.SIGTERM, None)
                _wait_all(procs)
                return failed[0] if failed[0] > 0 else 128 - failed[0]
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_all(procs: list[subprocess.Popen], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()


def _die_with_parent() -> None:
    pr_set_pdeathsig = 1
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
