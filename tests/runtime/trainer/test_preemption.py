"""SIGTERM mid-run (Kueue preemption, node drain, suspend): a checkpoint at the step in flight,
and the next attempt resumes from it to the same weights as a run never interrupted."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kuberl_runtime.checkpoint import CheckpointManager
from kuberl_runtime.distributed import RankInfo
from support.warm_python import BASE_ENV, WarmProcess, warm_python
from tests.runtime.trainer.conftest import assert_same_training, base_config, run_train

pytestmark = pytest.mark.runtime

STEPS = 5
JOB = {"KUBERL_JOB_UID": "uid-first", "KUBERL_JOB_NAME": "first", "KUBERL_JOB_NAMESPACE": "ns"}


def logged_steps(out: Path) -> list[int]:
    path = out / "logs" / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip()]


def start_train(config: dict[str, Any], tmp_path: Path, env: dict[str, str]) -> WarmProcess:
    path = tmp_path / "config-preempted.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = ["-m", "kuberl_cli.main", "train", str(path)]
    return warm_python().start(argv, {**os.environ, **BASE_ENV, **env})


def signal_after_first_step(proc: WarmProcess, out: Path) -> int:
    """SIGTERM once step 1 is logged; returns the last step logged before the signal."""
    deadline = time.monotonic() + 300
    while not logged_steps(out):
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no step logged within 300 s"
        time.sleep(0.05)
    before = max(logged_steps(out))
    proc.send_signal(signal.SIGTERM)
    return before


@pytest.mark.parametrize("ranks", [1, 2])
def test_sigterm_saves_the_step_in_flight_and_the_next_attempt_resumes(
    tiny_model_dir, tmp_path, ranks
):
    # save_freq -1: no periodic checkpoint, so any checkpoint is the one the signal asked for.
    reference = tmp_path / "reference"
    config = base_config(
        tiny_model_dir, reference, total_training_steps=STEPS, save_freq=-1, n_gpus_per_node=ranks
    )
    done = run_train(config, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list(reference.glob("global_step_*"))

    out = tmp_path / "out"
    config["trainer"]["default_local_dir"] = str(out)
    proc = start_train(config, tmp_path, JOB)
    before = signal_after_first_step(proc, out)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    saved = CheckpointManager(out, RankInfo(0, 1, 0)).complete_steps()
    # The step in flight when the signal came (or the one just logged, when it came between
    # the log and the check), and no other.
    assert len(saved) == 1 and saved[0] in (before, before + 1), (saved, before)
    assert saved[0] < STEPS, "the run ended before the signal: nothing was tested"
    assert (out / "latest_checkpointed_iteration.txt").read_text().strip() == str(saved[0])
    assert f"saving a checkpoint at step {saved[0]}" in stderr
    assert not (out / "huggingface").exists()  # stopped, not finished

    resumed = run_train(config, tmp_path, env=JOB)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {out / f'global_step_{saved[0]}'}" in resumed.stderr
    assert_same_training(reference, out, list(range(1, STEPS + 1)))

    # Another job pointed at the same directory is refused, naming the directory and the owner.
    other = {**JOB, "KUBERL_JOB_UID": "uid-second", "KUBERL_JOB_NAME": "second"}
    refused = run_train(config, tmp_path, env=other)
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert f"af_output_dir {out} belongs to job:uid-first (ns/first)" in refused.stderr
    assert "uid-second" in refused.stderr
