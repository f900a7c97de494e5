"""Gang scheduling: the head is scheduled by the same scheduler as the workers.

A pool's ``schedulerName`` (volcano for Ascend chip topology, or any batch scheduler) used to
reach the workers only, so the head went through the default scheduler and sat outside the gang.
"""

from typing import Any

from kuberl_api.job import RLTrainingJobSpec


def worker_scheduler(spec: RLTrainingJobSpec) -> str | None:
    """The pools' scheduler when they name one (the first pool's, when several differ)."""
    return next((pool.scheduler_name for pool in spec.worker_pools if pool.scheduler_name), None)


def schedule_head_with_workers(body: dict[str, Any], spec: RLTrainingJobSpec) -> None:
    scheduler = worker_scheduler(spec)
    if scheduler:
        body["spec"]["headGroupSpec"]["template"]["spec"]["schedulerName"] = scheduler
