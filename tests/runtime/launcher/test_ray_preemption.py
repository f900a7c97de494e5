"""SIGTERM to a Ray job's driver (`ray job stop`: the operator's suspend, a Kueue eviction): the
ranks save a checkpoint after the step in flight, the driver exits 143, and resuming ends where
an uninterrupted run does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kuberl_runtime.checkpoint import CheckpointManager
from kuberl_runtime.distributed import RankInfo
from tests.runtime.launcher.test_ray_launcher import ray_address, two_rank_config  # noqa: F401
from tests.runtime.trainer.conftest import assert_same_training, run_train
from tests.runtime.trainer.test_preemption import signal_after_first_step

pytestmark = [pytest.mark.runtime, pytest.mark.long_cpu]  # a local Ray head: lane 1

# Enough steps that the ranks cannot finish the run in the second the driver may take to pass
# the signal on (under CI load a tiny step takes a fraction of a second).
STEPS = 10


def test_sigterm_to_the_driver_checkpoints_every_rank_and_resumes(
    ray_address,  # noqa: F811 (the fixture)
    tiny_model_dir,
    tmp_path,
):
    reference, out = tmp_path / "reference", tmp_path / "out"
    config = two_rank_config(tiny_model_dir, reference)
    config["trainer"].update(total_training_steps=STEPS, save_freq=-1)
    done = run_train(config, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]

    config["trainer"]["default_local_dir"] = str(out)
    path = tmp_path / "ray-config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "RAY_ADDRESS": ray_address,
           "KUBERL_SUBMISSION_ID": "job-a-1"}  # fmt: skip
    driver = subprocess.Popen(
        [sys.executable, "-m", "kuberl_cli.main", "train", str(path)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    before = signal_after_first_step(driver, out)
    _, stderr = driver.communicate(timeout=300)
    assert driver.returncode == 128 + signal.SIGTERM, stderr[-5000:]
    assert "asking the ranks to checkpoint and stop" in stderr
    saved = CheckpointManager(out, RankInfo(0, 1, 0)).complete_steps()
    # The driver notices the signal within its 1 s wait and the ranks at their next step end:
    # one checkpoint, at or after the step logged at the signal (nothing trained is lost), and
    # before the end (the run did stop early). Under load the ranks may finish a step more.
    assert len(saved) == 1 and before <= saved[0] < STEPS, (before, saved)
    assert not list(Path(out).glob(".kuberl-stop-*"))  # the driver removed its stop file

    resumed = run_train(config, tmp_path)  # the next attempt (here: local ranks)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"global_step_{saved[0]}" in resumed.stderr
    assert_same_training(reference, out, list(range(1, STEPS + 1)))
