"""The real-pod GRPO job and the operator that runs it: examples/demo.yaml as the e2e tier shrinks
it, on the CPU runtime image, with hostNetwork Ray on the real node and every input under one
host directory mounted into the pods at the same path."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from freeport import free_port
from realnode.jobs import on_real_node

from support.e2e_jobs import DIGIT_REWARD, REPO, demo_job
from support.rljobs import wait_for

GATED_REWARD = Path(__file__).with_name("gated_reward.py")
TRACKER = "latest_checkpointed_iteration.txt"  # kuberl_runtime.checkpoint.manager


def real_job(
    name: str, af: Path, inputs: Path, claims: tuple[str, str], api_port: int, steps: int,
    save_freq: int,
) -> dict[str, Any]:  # fmt: skip
    """`claims`: the output's and the inputs' PersistentVolumeClaims."""
    job = demo_job(name, af, inputs / "model", steps, save_freq)
    config = job["spec"]["backend_config"]
    config["data"]["train_files"] = str(inputs / "train.parquet")
    config["custom_reward_function"] = {"path": str(inputs / GATED_REWARD.name)}
    return on_real_node(job, api_port, claims[0], claims[1], str(inputs))


def hold_after_checkpoint(inputs: Path, af: Path) -> None:
    """From its first checkpoint on, the run writing to `af` waits in its reward function."""
    hold = inputs / "hold"
    hold.write_text(str(af / "checkpoints" / TRACKER) + "\n")
    hold.chmod(0o644)


def release(inputs: Path) -> None:
    (inputs / "hold").unlink(missing_ok=True)


def stage_inputs(inputs: Path, model: Path) -> None:
    """Model, data and reward function in one directory the pods mount read-only."""
    shutil.copytree(model, inputs / "model")
    shutil.copy(REPO / "examples" / "data" / "arith" / "train.parquet", inputs / "train.parquet")
    shutil.copy(DIGIT_REWARD, inputs / "digit_reward.py")
    shutil.copy(GATED_REWARD, inputs / GATED_REWARD.name)
    for path in (inputs, *inputs.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)


@contextlib.contextmanager
def operator(kubeconfig: str, namespace: str, work: Path) -> Iterator[dict[str, Any]]:
    """`python -m kuberl_operator` on the host, with no dashboard override: it finds each head
    from the RayCluster's pods, as in production."""
    key = work / "ray-token.key"
    # Printable: the operator strips whitespace around the key it reads (random bytes may lose one).
    key.write_text(secrets.token_hex(32))
    metrics, liveness = free_port(), free_port()
    argv = [
        sys.executable, "-m", "kuberl_operator", "-n", namespace, "--poll-interval", "1",
        "--backoff-base", "1", "--backoff-max", "4", "--ray-token-key-file", str(key),
        "--allow-host-network",  # the real node has no pod CNI: its jobs run hostNetwork
        # The Ray pods' termination grace period (300 s by default). After the pod-loss test's
        # forced delete, KubeRay recreates attempt 1's worker; when the operator deletes that
        # RayCluster, the new worker's `ray start` (PID 1, its head gone) ignores SIGTERM and
        # holds the node's CPUs for the whole grace period: attempt 2's worker stays Pending.
        "--stop-grace-seconds", "20",
        "--dashboard-grace-seconds", "300", "--metrics-host", "127.0.0.1",
        "--metrics-port", str(metrics), "--liveness", f"http://127.0.0.1:{liveness}/healthz",
    ]  # fmt: skip
    log_path = work / "operator.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            argv, env={**os.environ, "KUBECONFIG": kubeconfig}, stdout=log, stderr=log
        )
    try:
        wait_for(
            "operator liveness",
            lambda: _alive(process, liveness, log_path),
            timeout=120,
        )
        yield {"process": process, "log": log_path, "metrics": metrics}
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        print("----- operator log -----\n" + log_path.read_text(errors="replace")[-6000:])


def _alive(process: subprocess.Popen[bytes], port: int, log_path: Path) -> bool:
    assert process.poll() is None, log_path.read_text(errors="replace")[-4000:]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5):
            return True
    except OSError:
        return False


def operator_metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()
