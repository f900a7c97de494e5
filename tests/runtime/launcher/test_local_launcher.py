"""The local launcher's ranks (forked from `kuberl train`) live and die with the run: a rank
that dies stops the others and fails the run with its exit code, and a launcher killed outright
takes its ranks with it (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from support.rljobs import wait_for
from tests.runtime.trainer.conftest import base_config

pytestmark = pytest.mark.runtime


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:  # a zombie has no command line: it is gone as far as the run is concerned
        return Path(f"/proc/{pid}/cmdline").read_bytes() != b""
    except FileNotFoundError:
        return False


def _start_two_ranks(model_dir: Path, tmp_path: Path) -> tuple[subprocess.Popen, list[int]]:
    """A long 2-rank run, returned once both ranks have finished a step."""
    out = tmp_path / "out"
    config = base_config(model_dir, out, total_training_steps=1000, n_gpus_per_node=2)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    launcher = subprocess.Popen(
        [sys.executable, "-m", "kuberl_cli.main", "train", str(path)],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    metrics = out / "logs" / "metrics.jsonl"
    wait_for("a first step", lambda: metrics.exists() and metrics.read_text().strip(), 120, 0.2)
    ranks = _children(launcher.pid)
    assert len(ranks) == 2 and all(map(_alive, ranks)), ranks
    return launcher, ranks


@pytest.fixture
def two_ranks(tiny_model_dir, tmp_path) -> Iterator[tuple[subprocess.Popen, list[int]]]:
    launcher, ranks = _start_two_ranks(tiny_model_dir, tmp_path)
    yield launcher, ranks
    for pid in [launcher.pid, *ranks]:  # whatever a failed test left running
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    launcher.wait(timeout=60)


def test_a_dead_rank_stops_the_other_and_fails_the_run(two_ranks):
    launcher, ranks = two_ranks
    os.kill(ranks[1], signal.SIGKILL)
    _, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode == 128 + signal.SIGKILL, stderr[-3000:]
    assert "a rank exited with -9; stopping the others" in stderr
    assert not any(map(_alive, ranks))


def test_killing_the_launcher_kills_its_ranks(two_ranks):
    launcher, ranks = two_ranks
    launcher.kill()
    launcher.communicate(timeout=60)
    wait_for("the ranks to die with their launcher", lambda: not any(map(_alive, ranks)), 60, 0.2)
