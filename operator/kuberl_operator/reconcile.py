"""``reconcile(job)``: the one level-triggered function every handler and the timer call.

Read the job, validate its spec, compare with what exists, act, and write status — in that
order, under a per-job lock. Running it twice in a row changes nothing the second time.
"""

import copy
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kuberl_api.job import API_VERSION, KIND
from kuberl_operator import conditions as cond
from kuberl_operator import stopping
from kuberl_operator.accepted import (
    VALID,
    Accepted,
    accepted_events,
    is_news,
    validated_message,
)
from kuberl_operator.attempts import AttemptDriver, RayClientFactory
from kuberl_operator.builders import accelerator_summary
from kuberl_operator.chaining import JobReader, dependencies_allow_start
from kuberl_operator.config import OperatorConfig
from kuberl_operator.keyed_locks import KeyedLocks
from kuberl_operator.kube import Kube
from kuberl_operator.metrics import CONTROLLER, Metrics
from kuberl_operator.ray_gateway import RayGateway
from kuberl_operator.ray_jobs import RayJobsClient
from kuberl_operator.spec_policy import PolicySettings, policy_problems
from kuberl_operator.state import INVALID_SPEC, Event, JobState
from kuberl_operator.validating import DeadlineValidator

log = logging.getLogger(__name__)

EventSink = Callable[[dict[str, Any], Event], None]
CLUSTER_DELETED = "Deleted"


def utc_now() -> datetime:
    return datetime.now(UTC)


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        config: OperatorConfig,
        metrics: Metrics | None = None,
        emit: EventSink | None = None,
        ray_client: RayClientFactory = RayJobsClient,
        clock: Callable[[], datetime] = utc_now,
        jobs: JobReader | None = None,
    ) -> None:
        self.kube = kube
        self.jobs: JobReader = jobs or kube
        """Where other jobs (dependsOn) are read: watch-kept memory in the operator."""
        self.config = config
        self.metrics = metrics or Metrics()
        self.emit = emit or (lambda body, event: None)
        self.clock = clock
        self.ray_gateway = RayGateway(
            config.ray_call_timeout,
            config.ray_cooldown_seconds,
            clock=lambda: self.clock().timestamp(),
        )
        self.attempts = AttemptDriver(kube, config, self.metrics, self.ray_gateway.wrap(ray_client))
        self._locks = KeyedLocks()
        settings = PolicySettings.of(config)  # all of the config validation reads
        self.validator = DeadlineValidator(
            lambda spec: policy_problems(spec, settings),
            config.validation_timeout,
            settings=repr(settings),
        )

    # --- entry points ----------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str) -> JobState | None:
        started = time.monotonic()
        result = "success"
        try:
            with self._locks.hold(f"{namespace}/{name}"):
                body = self.kube.get_job(namespace, name)
                if body is None or body["metadata"].get("deletionTimestamp"):
                    return None
                state = JobState.read(body, self.clock())
                self._reconcile(state)
                if cond.get_condition(state.status, cond.SYNCED) is not None:
                    state.condition(cond.SYNCED, True, "ReconcileSuccess")
                self._write(state)
                return state
        except Exception:
            result = "error"
            self.metrics.reconcile_errors.labels(CONTROLLER).inc()
            raise
        finally:
            self.metrics.reconcile_total.labels(CONTROLLER, result).inc()
            self.metrics.reconcile_time.labels(CONTROLLER).observe(time.monotonic() - started)

    def report_error(self, namespace: str, name: str, message: str) -> None:
        """A reconcile raised: say so in the Synced condition (the handler posts the event).

        Best effort: the error may be the API server itself, and then this fails too (logged).
        """
        try:
            with self._locks.hold(f"{namespace}/{name}"):
                body = self.kube.get_job(namespace, name)
                if body is None or body["metadata"].get("deletionTimestamp"):
                    return
                state = JobState.read(body, self.clock())
                state.condition(cond.SYNCED, False, cond.RECONCILE_ERROR, message)
                patch = state.status_patch()
                if patch:
                    self.kube.patch_job_status(namespace, name, patch)
        except Exception:
            log.exception("could not record the reconcile error of %s/%s", namespace, name)

    def finalize(self, body: dict[str, Any]) -> None:
        """The job is being deleted: stop its Ray job; ownerReferences remove the rest."""
        state = JobState.read(body, self.clock())
        attempt = state.active_attempt()
        if attempt is not None and state.submitted(attempt):
            self.attempts.stop(state, attempt, "JobDeleted")
        if attempt is not None:
            self.attempts.forget(state, attempt)  # also when it was never submitted
        self.metrics.forget(state.ref.uid, state.ref.namespace, state.ref.name)
        self.validator.forget(state.ref.namespace, state.ref.name)

    # --- the decision ----------------------------------------------------------------------

    def _reconcile(self, state: JobState) -> None:
        state.status.observed_generation = state.generation
        if state.status.phase is None:
            state.set_phase("Pending", "validating")
        self._validate(state)
        if state.terminal:
            self._finished(state)
            return
        attempt = state.active_attempt()
        if state.spec is None:
            if attempt is None:
                state.finish(
                    False, INVALID_SPEC, "the spec is invalid; see the Validated condition"
                )
                return
            # An invalid update mid-run: the running attempt goes on; nothing new starts.
        elif cond.get_condition(state.status, cond.FAILED):
            state.condition(cond.FAILED, False, "SpecFixed", "the spec is valid again")
        if stopping.pending(state):
            if not stopping.settle(state, self.attempts):
                return  # the stopped Ray job is still saving: the cluster stays
            self._delete_clusters(state)
        if state.run_policy.suspend:
            self._suspend(state)
            return
        if self._deadline_passed(state):
            if attempt is not None:
                self.attempts.stop(state, attempt, "DeadlineExceeded")
            seconds = state.run_policy.active_deadline_seconds
            state.finish(False, "DeadlineExceeded", f"activeDeadlineSeconds ({seconds}) passed")
            self._finished(state)
            return
        if cond.is_true(state.status, cond.SUSPENDED):
            state.condition(cond.SUSPENDED, False, "Resumed", "resuming from the latest checkpoint")
            state.status.start_time = state.timestamp()
        if attempt is None:
            if state.spec is None or not self._retry_due(state):
                return
            missing = self.config.waits.missing_dependency_seconds
            if not dependencies_allow_start(self.jobs, state, missing):  # chaining.py
                if state.terminal:
                    self._finished(state)
                return
            attempt = self.attempts.start(state)
        self.attempts.drive(state, attempt)
        self._checkpoint_condition(state)
        if state.terminal:
            self._finished(state)

    def _validate(self, state: JobState) -> None:
        manifest = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": state.ref.name, "namespace": state.ref.namespace},
            "spec": state.body.get("spec"),
        }
        verdict = self.validator.validate(manifest)
        problems, spec, effective = verdict.problems, verdict.spec, verdict.effective
        if problems:
            message = f"{len(problems)} problem(s): " + "; ".join(p.render() for p in problems)
            state.condition(cond.VALIDATED, False, INVALID_SPEC, message)
            return
        state.spec, state.effective = spec, effective
        assert spec is not None
        state.status.accelerators = accelerator_summary(spec.worker_pools)
        self._accepted(state, spec.training_config_key, verdict.accepted)

    def _accepted(self, state: JobState, config_key: str, accepted: Accepted) -> None:
        """Validated=True naming the warnings and no-effect keys; events once per generation."""
        message = validated_message(config_key, accepted)
        news = is_news(cond.get_condition(state.status, cond.VALIDATED), state.generation, message)
        state.condition(cond.VALIDATED, True, VALID, message)
        if news:
            for event in accepted_events(accepted):
                state.event(event.type, event.reason, event.message)

    def _retry_due(self, state: JobState) -> bool:
        due = cond.parse_time(state.status.next_retry_time)
        return due is None or state.now >= due

    def _deadline_passed(self, state: JobState) -> bool:
        deadline = state.run_policy.active_deadline_seconds
        started = cond.parse_time(state.status.start_time)
        return bool(deadline and started and (state.now - started).total_seconds() > deadline)

    def _checkpoint_condition(self, state: JobState) -> None:
        checkpoint = state.status.checkpoint
        if checkpoint is not None and checkpoint.latest_step is not None:
            where = f" at {checkpoint.latest_path}" if checkpoint.latest_path else ""
            message = f"step {checkpoint.latest_step}{where}"
            state.condition(cond.CHECKPOINT_AVAILABLE, True, "CheckpointSaved", message)
        elif cond.get_condition(state.status, cond.CHECKPOINT_AVAILABLE) is None:
            state.condition(cond.CHECKPOINT_AVAILABLE, False, "NoCheckpointYet", "")

    # --- suspend and finish ----------------------------------------------------------------

    def _suspend(self, state: JobState) -> None:
        """Stop the running attempt; its cluster goes once the Ray job ended (stopping.py)."""
        attempt = state.active_attempt()
        waiting = attempt is not None and stopping.begin(state, self.attempts, attempt)
        state.status.next_retry_time = None
        state.set_phase("Suspended", "suspended; checkpoints are kept")
        if cond.get_condition(state.status, cond.RUNNING):
            state.condition(cond.RUNNING, False, "Suspended")
        if waiting and not stopping.settle(state, self.attempts):
            return  # asked to stop; later reconciles poll it (a Ray job rarely ends at once)
        self._delete_clusters(state)
        if not cond.is_true(state.status, cond.SUSPENDED):
            state.condition(cond.SUSPENDED, True, "Suspended", "spec.runPolicy.suspend is true")

    def _finished(self, state: JobState) -> None:
        policy = state.run_policy
        keep = policy.cleanup_policy == "KeepAll" or (
            policy.cleanup_policy == "KeepOnFailure" and state.status.phase == "Failed"
        )
        if not keep:
            self._delete_clusters(state)
        ttl = policy.ttl_seconds_after_finished
        finished = cond.parse_time(state.status.completion_time)
        expired = finished is not None and (state.now - finished).total_seconds() >= (ttl or 0)
        if ttl is not None and expired:
            log.info("deleting %s/%s: ttlSecondsAfterFinished", *_where(state))
            self.kube.delete_job(state.ref.namespace, state.ref.name)

    def _delete_clusters(self, state: JobState) -> None:
        """Delete the job's RayClusters, after writing the status that explains it: a crash
        between the two never leaves a finished (or suspended) job without its status."""
        mirror = state.status.ray_cluster
        if mirror is None or mirror.state == CLUSTER_DELETED:
            return
        self._flush(state)
        for raycluster in self.kube.list_rayclusters(state.ref.namespace, state.ref.name):
            self.kube.delete_raycluster(state.ref.namespace, raycluster["metadata"]["name"])
        mirror.state = CLUSTER_DELETED
        mirror.ready_workers = None
        state.condition(cond.CLUSTER_READY, False, "ClusterDeleted", "RayCluster deleted")

    # --- writing ---------------------------------------------------------------------------

    def _flush(self, state: JobState) -> None:
        """Write the status now (phase, attempts, reasons), mid-reconcile; the final write
        then sends only what changed after it."""
        patch = state.status_patch()
        if not patch:
            return
        self.kube.patch_job_status(state.ref.namespace, state.ref.name, patch)
        written = dict(state.original)
        for key, value in patch.items():
            if key == "progress":
                continue  # runtime-owned; only the oversized metrics were dropped
            if value is None:
                written.pop(key, None)
            else:
                written[key] = copy.deepcopy(value)
        state.original = written
        state.drop_metrics = False

    def _write(self, state: JobState) -> None:
        patch = state.status_patch()
        if patch:
            self.kube.patch_job_status(state.ref.namespace, state.ref.name, patch)
        self.metrics.observe_phase(state.ref.uid, state.status.phase)
        for event in state.events:
            self.emit(state.body, event)


def _where(state: JobState) -> tuple[str, str]:
    return state.ref.namespace, state.ref.name
