"""One rank: join the process group, build the components, run the trainer.

A launcher calls `run_worker` (or `run_worker_exit_code`) with RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT in the environment: the local launcher in a process it forked, the
Ray launcher in a rank's actor.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import warnings

import torch

from kuberl_api.plan import RunPlan
from kuberl_api.plan.sft import SFTPlan
from kuberl_runtime.checkpoint.owner import OutputDirOwned
from kuberl_runtime.config import RunConfig
from kuberl_runtime.device import resolve_device, threads_per_rank
from kuberl_runtime.distributed import init_distributed, shutdown_distributed
from kuberl_runtime.dryrun.from_plan import JobDoesNotFit, check_memory_plan
from kuberl_runtime.initializer import initialize_inputs
from kuberl_runtime.reporting.k8s import initializer_heartbeat
from kuberl_runtime.tracking.progress import progress_reporter_from_env
from kuberl_runtime.trainer.preemption import EXIT_CODE as PREEMPTED_EXIT_CODE
from kuberl_runtime.trainer.preemption import Preempted


def run_worker(run: RunConfig) -> None:
    import transformers

    from kuberl_runtime.trainer.components import build_components
    from kuberl_runtime.trainer.loop import Trainer

    transformers.utils.logging.disable_progress_bar()  # the console tracker owns the terminal
    # FSDP2 warns that HF heads return views; nothing here modifies model outputs in place.
    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")
    # Remote models and data into the input cache, before anything reads them.
    plan = initialize_inputs(run.plan, initializer_heartbeat())
    run = RunConfig(plan)
    device = resolve_device(plan.placement.device)
    if not isinstance(plan, SFTPlan) and os.environ.get("RANK", "0") == "0":
        # Fail fast, before the process group and any weight (the others wait in its rendezvous).
        check_memory_plan(plan, device.type)
    ranks = init_distributed(device, timeout_s=plan.placement.nccl_timeout)
    if device.type == "cpu":
        torch.set_num_threads(threads_per_rank(ranks.world_size))
    device.bind(ranks.local_rank)
    if not ranks.is_main:
        logging.getLogger().setLevel(logging.WARNING)
    torch.manual_seed(plan.trainer.seed)
    try:
        if isinstance(plan, SFTPlan):
            from kuberl_runtime.sft.components import build_sft_components
            from kuberl_runtime.sft.trainer import SFTTrainer

            sft = build_sft_components(run, device, ranks)
            SFTTrainer(sft, progress_reporter_from_env()).fit()
        else:
            components = build_components(run, device, ranks)
            try:
                Trainer(components, progress_reporter_from_env()).fit()
            finally:
                # vLLM's teardown needs the default process group: before shutdown_distributed.
                components.rollout.close()
                components.reward_manager.close()
    finally:
        shutdown_distributed()


def import_rank_modules(plan: RunPlan | SFTPlan) -> None:
    """Import what `run_worker` imports for this plan, so that ranks forked from this process
    start with it imported."""
    if isinstance(plan, SFTPlan):
        names = _SFT_MODULES
    else:
        names = _RL_MODULES + (_VLLM_MODULES if plan.rollout.name == "vllm" else ())
    for name in ("transformers", *names):
        importlib.import_module(name)


_RL_MODULES = ("kuberl_runtime.trainer.components", "kuberl_runtime.trainer.loop")
_SFT_MODULES = ("kuberl_runtime.sft.components", "kuberl_runtime.sft.trainer")
# vLLM is built to be imported before its workers fork (it initializes no accelerator on import).
_VLLM_MODULES = ("vllm", "vllm.entrypoints.llm")


def run_worker_exit_code(run: RunConfig) -> int:
    """`run_worker` as a process exit code: 0 done, 2 a configuration error (as `kuberl train`
    reports one), 143 stopped on request with a checkpoint (as a process SIGTERM ends)."""
    try:
        run_worker(run)
    except (JobDoesNotFit, OutputDirOwned) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Preempted as stopped:
        logging.getLogger(__name__).warning("%s; exiting %d", stopped, PREEMPTED_EXIT_CODE)
        return PREEMPTED_EXIT_CODE
    return 0
