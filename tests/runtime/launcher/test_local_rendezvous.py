"""How local ranks find each other: no rank binds a port that another process could hold."""

import os
import socket
import subprocess
import sys

from kuberl_runtime.launcher.local import _rendezvous_store

JOIN = """
import os, torch, torch.distributed as dist
from kuberl_runtime.device import requested_device
from kuberl_runtime.distributed import init_distributed, shutdown_distributed
info = init_distributed(requested_device("cpu"), timeout_s=60)
value = torch.tensor([info.rank + 1])
dist.all_reduce(value)
print(info.rank, info.world_size, int(value))
shutdown_distributed()
"""


def _join(env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", JOIN],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_one_rank_ignores_an_inherited_master_port_that_is_taken():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = str(held.getsockname()[1])
        proc = _join(
            {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": taken}
        )
        output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, output
    assert output.split()[-3:] == ["0", "1", "1"]


def test_ranks_join_the_store_the_launcher_already_holds():
    store = _rendezvous_store(timeout_s=60)
    env = {
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(store.port),
        "TORCHELASTIC_USE_AGENT_STORE": "True",
    }
    procs = [_join({**env, "RANK": str(rank), "LOCAL_RANK": str(rank)}) for rank in (0, 1)]
    outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    # Both ranks summed 1 + 2 through one group whose store lives in this process.
    assert [output.split()[-3:] for output in outputs] == [["0", "2", "3"], ["1", "2", "3"]]
    assert store.num_keys() > 0
