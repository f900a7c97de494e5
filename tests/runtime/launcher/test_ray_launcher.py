"""The Ray launcher against a real local Ray head: 2 ranks over gloo train exactly like the
local spawn path, and a rank that dies fails the attempt with its rank, node and cause.

The head gets its own ports and temp dir on 127.0.0.1 (other Ray clusters may share the
machine) and is stopped through its own `--block` process, never `ray stop`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml

from kuberl_runtime.distributed import free_port
from tests.runtime.conftest import two_rank_config
from tests.runtime.trainer.conftest import deterministic, read_metrics, read_weights

pytestmark = [pytest.mark.runtime, pytest.mark.long_cpu]  # a local Ray head: lane 1

RAY = Path(sys.executable).with_name("ray")


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    # Short path: Ray's unix sockets live under the temp dir (108-byte limit).
    temp_dir = tempfile.mkdtemp(prefix="krl-ray-", dir="/tmp")
    port = free_port()
    ports = {
        "--port": port,
        "--ray-client-server-port": free_port(),
        "--dashboard-agent-listen-port": free_port(),
        "--dashboard-agent-grpc-port": free_port(),
        "--runtime-env-agent-port": free_port(),
        "--metrics-export-port": free_port(),
        "--node-manager-port": free_port(),
        "--object-manager-port": free_port(),
    }
    cmd = [str(RAY), "start", "--head", "--block", "--node-ip-address=127.0.0.1"]
    cmd += [f"{flag}={value}" for flag, value in ports.items()]
    cmd += [
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
        "--object-store-memory=100000000",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    head = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    try:
        _wait_for_head(head, address)
        yield address
    finally:
        head.terminate()
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_for_head(head: subprocess.Popen, address: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if head.poll() is not None:
            raise RuntimeError(f"ray head exited: {head.stdout.read().decode()[-3000:]}")
        probe = subprocess.run(
            [str(RAY), "status", f"--address={address}"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return
        time.sleep(1)
    raise RuntimeError("ray head did not come up")


def train_on_ray(config: dict, tmp_path: Path, address: str, env: dict | None = None):
    path = tmp_path / "ray-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "kuberl_cli.main", "train", str(path)],
        env={
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
            "RAY_ADDRESS": address,  # auto-selects the Ray launcher, like a Ray job entrypoint
            **(env or {}),
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_ray_ranks_match_local_spawn(ray_address, tiny_model_dir, two_rank_run, tmp_path):
    # The local side: the session's shared run of the same config (tests/runtime/conftest.py).
    local_out, ray_out = two_rank_run.out, tmp_path / "ray"
    on_ray = train_on_ray(two_rank_config(tiny_model_dir, ray_out), tmp_path, ray_address)
    assert on_ray.returncode == 0, on_ray.stderr[-5000:]
    assert "ray launcher: 2 ranks on 1 node(s)" in on_ray.stderr

    a, b = read_metrics(local_out), read_metrics(ray_out)
    assert sorted(a) == sorted(b) == [1, 2]
    for step in a:
        assert deterministic(b[step]) == pytest.approx(deterministic(a[step]), rel=1e-6, abs=1e-8)
    wa, wb = read_weights(local_out / "huggingface"), read_weights(ray_out / "huggingface")
    for name in wa:
        torch.testing.assert_close(wb[name], wa[name], atol=0, rtol=0)


def test_a_dead_rank_fails_the_attempt_with_rank_node_and_cause(
    ray_address, tiny_model_dir, tmp_path
):
    config = two_rank_config(tiny_model_dir, tmp_path / "out")
    result = train_on_ray(
        config,
        tmp_path,
        ray_address,
        env={"KUBERL_FAULT_POINT": "step_middle", "KUBERL_FAULT_STEP": "1"},
    )
    assert result.returncode == 1, result.stderr[-3000:]
    failure = re.search(r"rank (\d) on node (\S+) \((\w+)\) failed: (\w+): (.+)", result.stderr)
    assert failure, result.stderr[-3000:]
    assert failure.group(1) in ("0", "1")
    assert failure.group(4) == "ActorDiedError"  # the rank SIGKILLed itself
