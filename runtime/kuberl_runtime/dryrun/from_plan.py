"""The dry run's input from a job's frozen run plan, and the runtime's fail-fast check."""

from __future__ import annotations

import logging
from typing import Any

from kuberl_api.plan import RunPlan
from kuberl_runtime.dryrun.run import DryRunInput, run_dry
from kuberl_runtime.dryrun.verdict import FitVerdict, check_fit, format_report

logger = logging.getLogger(__name__)


def dry_run_input(plan: RunPlan, model_config: dict[str, Any], accelerator: str) -> DryRunInput:
    """Worst-case micro-batches (full-length rows) of the plan's own sizes."""
    actor, rollout, ref = plan.actor, plan.rollout, plan.ref
    width = rollout.prompt_length + rollout.response_length
    return DryRunInput(
        model_config=model_config,
        world_size=plan.placement.world_size,
        prompt_length=rollout.prompt_length,
        response_length=rollout.response_length,
        micro_batch_rows=_rows(
            actor.ppo_micro_batch_size_per_gpu, actor.ppo_max_token_len_per_gpu, width
        ),
        log_prob_micro_batch_rows=_rows(
            rollout.log_prob_micro_batch_size_per_gpu, rollout.log_prob_max_token_len_per_gpu, width
        ),
        ref_micro_batch_rows=_rows(
            ref.log_prob_micro_batch_size_per_gpu, ref.log_prob_max_token_len_per_gpu, width
        ),
        gradient_checkpointing=plan.model.enable_gradient_checkpointing,
        use_remove_padding=actor.use_remove_padding,
        needs_reference=ref.enabled and ref.separate_model,
        param_dtype=actor.fsdp_config.dtype,
        actor_dtype=actor.fsdp_config.model_dtype,
        ref_dtype=ref.fsdp_config.model_dtype,
        rollout_dtype=rollout.dtype,
        gpu_memory_utilization=rollout.gpu_memory_utilization,
        accelerator=accelerator,
    )


def _rows(rows: int, token_budget: int, width: int) -> int:
    """Fixed rows, or the rows a token budget holds at full length (use_dynamic_bsz: rows 0)."""
    return rows if rows > 0 else max(1, token_budget // width)


def check_before_loading(plan: RunPlan, model_config: dict[str, Any], accelerator: str) -> None:
    """Rank 0, before any weight is read: refuse a job whose memory plan cannot fit."""
    report = run_dry(dry_run_input(plan, model_config, accelerator))
    verdict: FitVerdict = check_fit(report)
    logger.info("memory plan:\n%s", format_report(report))
    if not verdict.fits:
        raise MemoryError(f"this job would run out of accelerator memory: {verdict.message}")
