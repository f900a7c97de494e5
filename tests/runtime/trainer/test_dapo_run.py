"""`kuberl train` with DAPO's dynamic sampling (algorithm.filter_groups) on the tiny CPU model.

Half the prompts (even answers) score 1 on every response: their groups carry no GRPO signal
and are dropped, more generation batches are drawn, and every step still trains on
train_batch_size groups. Killed between two generation batches, the run resumes from the
checkpoint plus the partial step and ends bitwise equal to the uninterrupted run.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
import torch

from tests.runtime.trainer.conftest import (
    assert_same_training,
    base_config,
    deterministic,
    read_metrics,
    read_weights,
    run_train,
)

pytestmark = pytest.mark.runtime

STEPS = 3
BATCH = 4
REWARD = Path(__file__).resolve().parent / "dapo_reward.py"


def config(model_dir, out_dir):
    cfg = base_config(model_dir, out_dir, total_training_steps=STEPS, save_freq=1)
    # verl's balance_batch regroups rows per DP rank: off, so one and two ranks train alike.
    cfg["trainer"]["balance_batch"] = False
    cfg["custom_reward_function"] = {"path": str(REWARD)}
    cfg["algorithm"]["filter_groups"] = {"enable": True, "metric": "acc"}
    cfg["data"]["gen_batch_size"] = BATCH
    return cfg


@pytest.fixture(scope="module")
def uninterrupted(tiny_model_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dapo")
    result = run_train(config(tiny_model_dir, tmp / "out"), tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "out", result.stderr


def test_constant_groups_are_dropped_and_every_batch_is_filled(uninterrupted):
    out, log = uninterrupted
    metrics = read_metrics(out)
    assert sorted(metrics) == list(range(1, STEPS + 1))
    for step, m in metrics.items():
        kept_ratio = m["training/filter_groups/kept_ratio"]
        gen_batches = m["train/num_gen_batches"]
        groups = gen_batches * BATCH
        assert m["training/filter_groups/evicted_samples"] == groups * (1 - kept_ratio)
        # the step's last line in the log: its batch reached train_batch_size groups
        filled = re.findall(rf"step {step} generation batch (\d+): .* (\d+) of {BATCH} in", log)
        assert int(filled[-1][0]) == gen_batches and int(filled[-1][1]) >= BATCH, step
    assert min(m["training/filter_groups/kept_ratio"] for m in metrics.values()) < 1
    assert max(m["train/num_gen_batches"] for m in metrics.values()) > 1
    # every trained group varies: GRPO's advantages of two different scores are +-1/sqrt(2)
    for m in metrics.values():
        assert m["critic/advantages/max"] == pytest.approx(2**-0.5, abs=1e-4)
        assert m["critic/advantages/min"] == pytest.approx(-(2**-0.5), abs=1e-4)
    assert not (out / "dynamic_sampling" / "partial.pt").exists()


def _last_multi_batch_step(reference: Path) -> int:
    """The last step that needed more than one generation batch: it resumes from a checkpoint."""
    step = max(s for s, m in read_metrics(reference).items() if m["train/num_gen_batches"] > 1)
    assert step > 1
    return step


def test_killed_between_generation_batches_resumes_bitwise(uninterrupted, tiny_model_dir, tmp_path):
    reference, _ = uninterrupted
    step = _last_multi_batch_step(reference)
    out = tmp_path / "out"
    crash = {"KUBERL_FAULT_POINT": "gen_batch", "KUBERL_FAULT_STEP": str(step)}
    killed = run_train(config(tiny_model_dir, out), tmp_path, env=crash)
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-3000:]
    assert (out / "dynamic_sampling" / "partial.pt").is_file()
    assert sorted(read_metrics(out)) == list(range(1, step))

    resumed = run_train(config(tiny_model_dir, out), tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"step {step} continues after generation batch 1" in resumed.stderr

    expected, got = read_metrics(reference), read_metrics(out)
    assert sorted(got) == list(range(1, STEPS + 1))
    for s in expected:
        assert deterministic(got[s]) == deterministic(expected[s]), f"step {s}"
    final = read_weights(out / "huggingface")
    for name, tensor in read_weights(reference / "huggingface").items():
        assert torch.equal(final[name], tensor), name


def test_two_ranks_killed_and_resumed_train_like_one(uninterrupted, tiny_model_dir, tmp_path):
    """Rank 0 writes the partial step, both ranks continue from it (each with its own RNG);
    rows are seeded per row, so two ranks filter the same groups as one."""
    reference, _ = uninterrupted
    step = _last_multi_batch_step(reference)
    out = tmp_path / "out"
    cfg = config(tiny_model_dir, out)
    cfg["trainer"]["n_gpus_per_node"] = 2
    crash = {"KUBERL_FAULT_POINT": "gen_batch", "KUBERL_FAULT_STEP": str(step)}
    killed = run_train(cfg, tmp_path, env=crash)
    assert killed.returncode in (-signal.SIGKILL, 128 + signal.SIGKILL), killed.stderr[-3000:]
    partial = torch.load(out / "dynamic_sampling" / "partial.pt", weights_only=False)
    assert (partial.step, partial.num_gen_batches, len(partial.rng)) == (step, 1, 2)

    resumed = run_train(cfg, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"step {step} continues after generation batch 1" in resumed.stderr
    assert_same_training(reference, out, list(range(1, STEPS + 1)))
