"""ROLL's global batch rule, and the verl mini/micro batch sizes it becomes.

ROLL optimises on per_device_train_batch_size x gradient_accumulation_steps x DP responses,
DP = devices / (TP x PP x CP) for Megatron, devices / ulysses_size for FSDP2. A rollout of
rollout_batch_size x num_return_sequences_in_group responses must be consumed in whole
optimisation steps, and kuberl (verl) counts mini-batches in whole prompt groups.
"""

import math
from dataclasses import dataclass

from kuberl_api.roll.draft import Draft
from kuberl_api.roll.models import RollConfig, StrategyConfig, TrainingArgs, WorkerConfig


@dataclass(frozen=True)
class ModelParallel:
    tp: int = 1
    pp: int = 1
    cp: int = 1

    @property
    def size(self) -> int:
        return self.tp * self.pp * self.cp

    @classmethod
    def of(cls, worker: WorkerConfig) -> "ModelParallel":
        args = worker.strategy_args
        if args is not None and args.strategy_name == "fsdp2_train":
            # ROLL's FSDP2 strategy: dp_size = world_size // ulysses_size.
            return cls(cp=worker.model_args.ulysses_size or 1)
        if args is None or args.strategy_name != "megatron_train":
            return cls()
        sc = args.strategy_config or StrategyConfig()
        return cls(
            sc.tensor_model_parallel_size or 1,
            sc.pipeline_model_parallel_size or 1,
            sc.context_parallel_size or 1,
        )


def map_train_batch(
    cfg: RollConfig, draft: Draft, role: str, world: int, verl_node: str
) -> int | None:
    """Set ``<verl_node>.ppo_mini_batch_size`` and ``ppo_micro_batch_size_per_gpu``.

    Returns the micro batch per device, or None when the rule fails (the error is in ``draft``).
    """
    worker: WorkerConfig = getattr(cfg, role)
    args = worker.training_args or TrainingArgs()
    mp = ModelParallel.of(worker)
    where = (role, "training_args", "per_device_train_batch_size")
    if world % mp.size:
        draft.error(
            (role, "strategy_args", "strategy_config"),
            f"{world} devices cannot be split into model-parallel groups of TP x PP x CP = "
            f"{mp.tp} x {mp.pp} x {mp.cp} = {mp.size}",
            "use parallel sizes whose product divides the number of devices",
        )
        return None
    dp = world // mp.size
    per_device, accumulation = args.per_device_train_batch_size, args.gradient_accumulation_steps
    optim_batch = per_device * accumulation * dp
    n = cfg.num_return_sequences_in_group
    rollout = cfg.rollout_batch_size * n
    formula = (
        f"per_device_train_batch_size x gradient_accumulation_steps x data-parallel size = "
        f"{per_device} x {accumulation} x {dp}"
    )
    if mp.size > 1:
        formula += f" ({world} devices / TP {mp.tp} x PP {mp.pp} x CP {mp.cp})"
    if rollout % optim_batch:
        draft.error(
            where,
            f"ROLL's optimisation batch {formula} = {optim_batch} responses does not divide the "
            f"rollout of rollout_batch_size x num_return_sequences_in_group = "
            f"{cfg.rollout_batch_size} x {n} = {rollout} responses, so a step would end with a "
            "partial optimisation step",
            _fix(rollout, per_device, dp),
            per_device,
        )
        return None
    if optim_batch % n:
        draft.error(
            where,
            f"ROLL's optimisation batch {formula} = {optim_batch} responses is not a whole number "
            f"of prompt groups of num_return_sequences_in_group={n}; kuberl updates on whole "
            "groups (verl's ppo_mini_batch_size counts prompts)",
            f"make it a multiple of {n}; {_fix(rollout, per_device, dp)}",
            per_device,
        )
        return None
    per_rank, leftover = divmod(optim_batch * mp.cp, world)
    if per_rank == 0 or leftover:
        draft.error(
            where,
            f"ROLL's optimisation batch of {optim_batch} responses cannot be split evenly over "
            f"kuberl's {world // mp.cp} data-parallel ranks (FSDP shards over every device)",
            f"use an optimisation batch that is a multiple of {world // mp.cp}",
            per_device,
        )
        return None
    micro = math.gcd(per_device, per_rank)
    draft.set(f"{verl_node}.ppo_mini_batch_size", optim_batch // n, *where)
    draft.set(f"{verl_node}.ppo_micro_batch_size_per_gpu", micro, *where)
    return micro


def _fix(rollout: int, per_device: int, dp: int) -> str:
    steps, left = divmod(rollout, per_device * dp)
    if steps and not left:
        return (
            f"for one optimisation step per rollout set gradient_accumulation_steps: {steps} "
            f"({per_device} x {steps} x {dp} = {rollout})"
        )
    return f"choose sizes whose optimisation batch divides {rollout}"
