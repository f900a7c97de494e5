"""Every wait has an end: the operator's default deadlines, and what happens when one passes.

A job may wait for Kueue to admit its RayCluster, for a RayCluster of the same name that another
(deleted) job still owns to go, for its Ray job to start running, for a dependency that was
never applied, and for its first progress heartbeat. Each wait says in the job's status what it
waits for and until when; past the deadline the attempt (or the job) fails with the reason.
A job's own ``runPolicy.preRunningDeadlineSeconds`` / ``progressDeadlineSeconds`` win over the
defaults here.
"""

import argparse
import os
from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from kuberl_api.job import Attempt
from kuberl_operator import conditions as cond
from kuberl_operator.failures import Failure, FailureClass
from kuberl_operator.state import JobState

QUEUE_DEADLINE = "QueueDeadlineExceeded"
STALE_OWNER = "StaleClusterOwner"


@dataclass(frozen=True)
class WaitDeadlines:
    pre_running_seconds: float = 3600.0
    """From the attempt's start (or admission) until its Ray job runs, unless the job says."""
    queue_seconds: float = 7 * 86400.0
    """How long Kueue may hold a job's RayCluster unadmitted."""
    stale_owner_seconds: float = 600.0
    """How long a RayCluster of the attempt's name owned by another job may take to go."""
    missing_dependency_seconds: float = 3600.0
    """How long a job waits for a dependsOn job that does not exist (from its creation)."""
    first_heartbeat_seconds: float = 3600.0
    """From RUNNING until the runtime's first progress heartbeat, unless the job says."""


def _flag(name: str) -> str:
    return "--" + name.removesuffix("_seconds").replace("_", "-") + "-deadline"


def add_wait_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per wait (``--queue-deadline``...), env ``KUBERL_QUEUE_DEADLINE``...; 0: none."""
    for item in fields(WaitDeadlines):
        flag = _flag(item.name)
        env = "KUBERL_" + flag.removeprefix("--").upper().replace("-", "_")
        parser.add_argument(
            flag,
            dest=f"wait_{item.name}",
            type=float,
            default=float(os.environ.get(env) or item.default),
            help=f"seconds (env {env}; 0: no deadline); default {item.default:.0f}",
        )


def waits_from_args(args: argparse.Namespace) -> WaitDeadlines:
    return WaitDeadlines(**{f.name: getattr(args, f"wait_{f.name}") for f in fields(WaitDeadlines)})


def _until(since: datetime, seconds: float) -> str:
    return cond.isoformat(since + timedelta(seconds=seconds))


def queue_overdue(state: JobState, attempt: Attempt, seconds: float) -> Failure | None:
    """Kueue holds the attempt's cluster: say until when; past it, the attempt fails."""
    queued = cond.get_condition(state.status, cond.QUEUED)
    since = cond.parse_time(attempt.start_time)
    if queued is not None and queued.status == "True":
        since = max(filter(None, (since, cond.parse_time(queued.last_transition_time))))
    if since is None or queued is None or seconds <= 0:
        return None
    waited = (state.now - since).total_seconds()
    if waited > seconds:
        message = (
            f"Kueue did not admit RayCluster {attempt.ray_cluster} within {seconds:.0f}s "
            f"({queued.message}); check the LocalQueue, its ClusterQueue and their quotas"
        )
        return Failure(QUEUE_DEADLINE, message, FailureClass.CONFIG)
    until = _until(since, seconds)
    message = f"{queued.message}; the attempt fails {QUEUE_DEADLINE} if not admitted by {until}"
    state.condition(cond.QUEUED, True, queued.reason, message)
    return None


def stale_owner_overdue(state: JobState, attempt: Attempt, seconds: float) -> Failure | None:
    """Another job's RayCluster has the attempt's name: wait for it to go, but not forever."""
    since = cond.parse_time(attempt.start_time) or state.now
    waited = (state.now - since).total_seconds()
    if seconds <= 0:
        state.set_phase("Provisioning", f"waiting for RayCluster {attempt.ray_cluster} to go")
        return None
    if waited > seconds:
        message = (
            f"RayCluster {attempt.ray_cluster} belongs to another job and was not removed within "
            f"{seconds:.0f}s; the next attempt uses another name"
        )
        return Failure(STALE_OWNER, message, FailureClass.INFRA)
    state.set_phase(
        "Provisioning",
        f"waiting for RayCluster {attempt.ray_cluster}, owned by another job, to go "
        f"(until {_until(since, seconds)}, then the attempt fails {STALE_OWNER})",
    )
    return None
