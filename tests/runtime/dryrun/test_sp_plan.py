"""The dry run's input and verdict with Ulysses SP, without running it: the plan's (dp, sp)
layout and SP-scaled token budgets reach `DryRunInput`, and a job whose activations do not fit
is told the SP degree that does."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuberl_runtime.config import load_run_config
from kuberl_runtime.dryrun import DryRunInput, PhaseResult, check_fit, model_config
from kuberl_runtime.dryrun.from_plan import dry_run_input
from kuberl_runtime.dryrun.run import DryRunReport, GiB

SEED_32B = Path(__file__).with_name("modelarts-32b.yaml")
SP_KEY = "actor_rollout_ref.actor.ulysses_sequence_parallel_size"


def _plan(*sets: str):
    return load_run_config(SEED_32B, list(sets)).plan


def test_the_seed_with_sp2_plans_dp16_x_sp2():
    plan = _plan(f"{SP_KEY}=2")
    spec = dry_run_input(plan, model_config("Qwen2.5-32B"), "910B")
    assert (spec.world_size, spec.sp_size, spec.dp_size) == (32, 2, 16)
    assert (spec.micro_batch_rows, spec.log_prob_micro_batch_rows) == (2, 4)  # rows per SP group


@pytest.mark.parametrize("sp", [1, 2, 4])
def test_token_budgets_cover_the_sp_group(sp):
    """use_dynamic_bsz: a micro-batch holds max_token_len x sp tokens (the runtime's split)."""
    plan = _plan(
        f"{SP_KEY}={sp}",
        "actor_rollout_ref.actor.use_dynamic_bsz=true",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=6144",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=12288",
    )
    spec = dry_run_input(plan, model_config("Qwen2.5-32B"), "910B")
    width = 1024 + 2048
    assert spec.micro_batch_rows == 6144 * sp // width
    assert spec.log_prob_micro_batch_rows == 12288 * sp // width


def _report(update_peak_gib: float, world: int = 8) -> DryRunReport:
    spec = DryRunInput(
        model_config=model_config("Qwen2.5-7B"),  # 28 heads, 4 KV heads
        world_size=world,
        prompt_length=512,
        response_length=16384,
        micro_batch_rows=1,
        log_prob_micro_batch_rows=1,
    )
    phases = [
        PhaseResult("update_actor", int(update_peak_gib * GiB), 0, 0),
        PhaseResult("old_log_prob", 20 * GiB, 0, 0),
    ]
    return DryRunReport(spec, 7_600_000_000, 14 * GiB, phases)


@pytest.mark.parametrize(("peak", "sp"), [(100, 2), (200, 4)])
def test_activations_that_do_not_fit_get_the_sp_degree_that_does(peak, sp):
    """Static 14 GiB + 3 GiB overhead; (peak - static) / sp must fit 90% of 79.1 GiB."""
    verdict = check_fit(_report(peak))
    assert not verdict.fits
    (problem,) = verdict.problems
    assert "one row does not fit" in problem
    assert f"or set {SP_KEY}={sp} (Ulysses: each sequence split {sp} ways" in problem


def test_no_sp_advice_where_no_degree_fits():
    """On 8 ranks, 600 GiB of activations fit at no SP degree: the advice does not name SP."""
    (problem,) = check_fit(_report(600)).problems
    assert "one row does not fit" in problem and SP_KEY not in problem
