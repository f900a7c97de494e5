"""Rank 0's fail-fast memory check: the dry run's verdict before the process group and any weight.

On CPU the check is off unless `KUBERL_MEMORY_CHECK_GIB` plans against a given device memory; a
3 GiB "accelerator" cannot hold even the tiny model beside the allowance for contexts and vLLM,
so the job is refused as a configuration error (exit 2) with the plan's advice, on one rank
(in-process) and on two (the local launcher's worker processes).
"""

from __future__ import annotations

import pytest

from kuberl_runtime.config import run_config_from_dict
from kuberl_runtime.dryrun.from_plan import JobDoesNotFit, check_memory_plan

from .conftest import base_config, run_train

pytestmark = pytest.mark.runtime


def test_cpu_runs_skip_the_check(tiny_model_dir, tmp_path):
    plan = run_config_from_dict(base_config(tiny_model_dir, tmp_path)).plan
    assert check_memory_plan(plan, "cpu", environ={}) is None
    assert check_memory_plan(plan, "cuda", environ={"KUBERL_MEMORY_CHECK": "off"}) is None


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_job_over_the_device_memory_fails_fast_with_exit_2(tiny_model_dir, tmp_path, ranks):
    out = tmp_path / "out"
    config = base_config(tiny_model_dir, out, n_gpus_per_node=ranks)
    result = run_train(config, tmp_path, env={"KUBERL_MEMORY_CHECK_GIB": "3"})
    assert result.returncode == 2, result.stderr[-3000:]
    assert "would run out of accelerator memory" in result.stderr
    assert "does not fit" in result.stderr
    assert "KUBERL_MEMORY_CHECK=off" in result.stderr
    assert not (out / "logs").exists()  # refused before the trainer started


def test_a_job_that_fits_passes_the_check_and_trains(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    config = base_config(tiny_model_dir, out, total_training_steps=1)
    result = run_train(config, tmp_path, env={"KUBERL_MEMORY_CHECK_GIB": "80"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "memory plan" in result.stderr
    assert "fits: training peak" in result.stderr
    assert (out / "logs" / "metrics.jsonl").read_text().count("\n") == 1


def test_the_verdict_is_enforced_only_under_the_torch_it_was_checked_with(tiny_model_dir, tmp_path):
    plan = run_config_from_dict(base_config(tiny_model_dir, tmp_path)).plan
    tiny_device = {"KUBERL_MEMORY_CHECK_GIB": "3"}
    with pytest.raises(JobDoesNotFit, match="would run out of accelerator memory"):
        check_memory_plan(plan, "cuda", environ=tiny_device, torch_version="2.13.0+cu130")
    # torch 2.11 (the NPU image's) over-states the update: reported, the job goes on.
    assert check_memory_plan(plan, "cuda", environ=tiny_device, torch_version="2.11.0") is None
