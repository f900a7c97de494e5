"""`fsdp_config.optimizer_offload` in the dry run: the AdamW moments are off the device but during
each optimizer step (engine/optim_offload.py), so the state resident outside the step drops by
them and the step itself still holds them. The dry run runs the engine's own offload, parking
the moments on a device that is not the accelerator's stand-in."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch.distributed as dist

from kuberl_runtime.config import load_run_config
from kuberl_runtime.dryrun import DryRunInput, DryRunReport, check_fit, format_report, run_dry
from kuberl_runtime.dryrun.from_plan import dry_run_input
from kuberl_runtime.dryrun.run import GiB
from support.narrow import narrow_job

pytestmark = pytest.mark.skipif(dist.is_initialized(), reason="needs a process without a group")

NARROW = narrow_job(3)  # world 8: the update peaks in its forward/backward
# One rank, one short row: the update peaks in the optimizer step (state, weights and gradients).
STEP_BOUND = dataclasses.replace(
    NARROW,
    world_size=1,
    prompt_length=16,
    response_length=16,
    micro_batch_rows=1,
    log_prob_micro_batch_rows=1,
)
ADAMW_BYTES_PER_PARAMETER = 8  # exp_avg + exp_avg_sq, fp32
UNCHANGED = ("flops", "collective_bytes", "tokens", "largest_bytes", "largest_fp32_bytes")


def _pair(spec: DryRunInput) -> tuple[DryRunReport, DryRunReport]:
    return run_dry(spec), run_dry(dataclasses.replace(spec, optimizer_offload=True))


@pytest.fixture(scope="module")
def narrow() -> tuple[DryRunReport, DryRunReport]:
    return _pair(NARROW)


@pytest.fixture(scope="module")
def step_bound() -> tuple[DryRunReport, DryRunReport]:
    return _pair(STEP_BOUND)


def test_the_resident_state_drops_by_the_moments(narrow):
    resident, offloaded = narrow
    moments = offloaded.offloaded_optimizer_bytes
    per_rank = ADAMW_BYTES_PER_PARAMETER * offloaded.parameters / NARROW.world_size
    assert moments == pytest.approx(per_rank, rel=0.01)  # rank 0's shards (FSDP2 pads dim 0)
    assert resident.offloaded_optimizer_bytes == 0
    assert resident.static_bytes - offloaded.static_bytes == moments
    assert offloaded.parameters == resident.parameters


def test_every_phase_after_the_first_update_runs_without_them(narrow):
    resident, offloaded = narrow
    moments = offloaded.offloaded_optimizer_bytes
    init, *trained = zip(resident.phases, offloaded.phases, strict=True)
    assert init[0] == init[1]  # no optimizer state yet
    for before, after in trained:
        assert after.name == before.name
        assert before.start_bytes - after.start_bytes == moments, before.name
        assert before.peak_bytes - after.peak_bytes == moments, before.name
        for name in UNCHANGED:
            assert getattr(after, name) == getattr(before, name), (before.name, name)


def test_the_optimizer_step_holds_them(step_bound):
    """Where the update peaks in the step, offload does not lower the peak: the moments are
    fetched for it. The update still starts, and the other phases run, without them."""
    resident, offloaded = step_bound
    moments = offloaded.offloaded_optimizer_bytes
    assert moments == ADAMW_BYTES_PER_PARAMETER * offloaded.parameters  # one rank: every one
    update = resident.phase("update_actor"), offloaded.phase("update_actor")
    assert update[1].peak_bytes == update[0].peak_bytes
    assert update[0].start_bytes - update[1].start_bytes == moments
    assert update[1].peak_bytes >= offloaded.static_bytes + moments
    for name in ("old_log_prob", "ref_log_prob", "weight_sync"):
        drop = resident.phase(name).peak_bytes - offloaded.phase(name).peak_bytes
        assert drop == moments, name


def test_the_verdict_counts_and_reports_it(narrow):
    resident, offloaded = narrow
    gib = offloaded.offloaded_optimizer_bytes / GiB
    before, after = check_fit(resident), check_fit(offloaded)
    assert before.rollout_gib - after.rollout_gib == pytest.approx(gib)
    assert before.train_peak_gib - after.train_peak_gib == pytest.approx(gib)
    line = "optimizer state in host memory (actor.fsdp_config.optimizer_offload): "
    assert f"{line}{gib:.2f} GiB per rank" in format_report(offloaded)
    assert line not in format_report(resident)


@pytest.mark.parametrize("value", [True, False])
def test_the_plan_key_reaches_the_dry_run(value):
    seed = Path(__file__).with_name("modelarts-32b.yaml")
    key = "actor_rollout_ref.actor.fsdp_config.optimizer_offload"
    plan = load_run_config(seed, [f"{key}={str(value).lower()}"]).plan
    assert plan.actor.fsdp_config.optimizer_offload is value
    spec = dry_run_input(plan, NARROW.model_config, "910B")
    assert spec.optimizer_offload is value
