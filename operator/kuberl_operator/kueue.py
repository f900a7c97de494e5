"""Kueue: a job with ``scheduling.queueName`` is queued through Kueue's RayCluster integration.

Kueue cannot queue an RLTrainingJob itself (external frameworks must be Go), so each attempt's
RayCluster is the Workload: it is created suspended with the queue (and priority) labels, Kueue
unsuspends it on admission and suspends it again on eviction (preemption, deactivation). The
operator never writes ``RayCluster.spec.suspend`` afterwards; it only reads it:

* suspended before the attempt ran: ``Queued`` (waiting for admission); queue time does not
  count against ``preRunningDeadlineSeconds``;
* suspended after admission: the attempt is *evicted*: its Ray job is stopped, the attempt ends
  ``Stopped``/``Evicted`` without charging ``backoffLimit``, and the next attempt reuses the same
  RayCluster (its place in the queue) and resumes from the checkpoint once Kueue re-admits it.
"""

from collections.abc import Callable
from typing import Any

from kuberl_api.job import Attempt, RLTrainingJobSpec
from kuberl_operator import conditions as cond
from kuberl_operator.names import LABEL_QUEUE
from kuberl_operator.state import JobState

StopAttempt = Callable[[JobState, Attempt, str], None]

LABEL_PRIORITY = "kueue.x-k8s.io/priority-class"
EVICTED = "Evicted"


def queue_raycluster(body: dict[str, Any], spec: RLTrainingJobSpec) -> None:
    """Make a freshly built RayCluster a Kueue workload: suspended, with priority label."""
    scheduling = spec.scheduling
    if not scheduling.queue_name:
        return
    # What Kueue's own webhook does for a queued RayCluster: no pod starts before admission.
    body["spec"]["suspend"] = True
    if scheduling.workload_priority_class:
        body["metadata"]["labels"][LABEL_PRIORITY] = scheduling.workload_priority_class


def managed(raycluster: dict[str, Any]) -> bool:
    return bool((raycluster.get("metadata", {}).get("labels") or {}).get(LABEL_QUEUE))


def held(raycluster: dict[str, Any]) -> bool:
    """Kueue holds the cluster suspended: not admitted yet, or evicted."""
    return managed(raycluster) and bool((raycluster.get("spec") or {}).get("suspend"))


def queue_of(raycluster: dict[str, Any]) -> str:
    return (raycluster.get("metadata", {}).get("labels") or {}).get(LABEL_QUEUE, "")


def observe(
    state: JobState, attempt: Attempt, raycluster: dict[str, Any], stop: StopAttempt
) -> bool:
    """Record Kueue's view of the attempt's cluster; True while Kueue holds it."""
    status, queue = state.status, queue_of(raycluster)
    if not held(raycluster):
        state.condition(cond.QUEUED, False, "Admitted", f"admitted by Kueue from {queue}")
        state.condition(cond.ADMITTED, True, "Admitted", f"LocalQueue {queue}")
        return False
    if _admitted_during(state, attempt) or state.submitted(attempt):
        message = f"Kueue suspended RayCluster {attempt.ray_cluster} (preempted or evicted)"
        stop(state, attempt, EVICTED)  # not a failure: no retry is charged
        attempt.message = message
        state.condition(cond.ADMITTED, False, EVICTED, message)
        state.condition(cond.QUEUED, True, EVICTED, f"requeued in {queue}")
        if cond.get_condition(status, cond.RUNNING):
            state.condition(cond.RUNNING, False, EVICTED, message)
        state.set_phase("Provisioning", f"{message}; resumes from the checkpoint on re-admission")
        return True
    state.condition(cond.QUEUED, True, "WaitingForAdmission", f"LocalQueue {queue}")
    state.condition(cond.ADMITTED, False, "WaitingForAdmission", f"LocalQueue {queue}")
    state.condition(cond.CLUSTER_READY, False, "Queued", "suspended until Kueue admits it")
    state.set_phase("Provisioning", f"attempt {attempt.index}: queued in Kueue LocalQueue {queue}")
    return True


def _admitted_during(state: JobState, attempt: Attempt) -> bool:
    admitted = cond.get_condition(state.status, cond.ADMITTED)
    if admitted is None or admitted.status != "True":
        return False
    since, started = (
        cond.parse_time(admitted.last_transition_time),
        cond.parse_time(attempt.start_time),
    )
    return since is not None and started is not None and since >= started
