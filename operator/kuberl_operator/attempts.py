"""One attempt's life: RayCluster up, one submission, poll it, explain how it ended.

Every step is idempotent: names are derived from the attempt index, "already exists" and
"submission id already used" count as done, so a restarted operator never duplicates work.
"""

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from kuberl_api.job import Attempt, RayClusterStatus, RayJobStatus
from kuberl_operator import conditions as cond
from kuberl_operator import kueue
from kuberl_operator.builders import build_submission
from kuberl_operator.builders.submission import STOP_WAIT_SECONDS
from kuberl_operator.cluster_health import cluster_health
from kuberl_operator.config import OperatorConfig
from kuberl_operator.failures import (
    Failure,
    FailureClass,
    backoff_seconds,
    classify_ray_failure,
    retry_verdict,
)
from kuberl_operator.hostnet_head import head_ports, host_network_dashboard
from kuberl_operator.kube import Kube
from kuberl_operator.liveness import Liveness, clock_key
from kuberl_operator.metrics import Metrics
from kuberl_operator.names import head_service_url, raycluster_name, submission_id, token_key_id
from kuberl_operator.provisioning import create_cluster, pod_creation_failure
from kuberl_operator.ray_auth import RayAuth, UnknownTokenKey, unlocked_head
from kuberl_operator.ray_jobs import (
    DashboardUnavailable,
    JobInfo,
    RayJobsClient,
    SubmissionRejected,
)
from kuberl_operator.state import JobState
from kuberl_operator.waits import queue_overdue, stale_owner_overdue

log = logging.getLogger(__name__)

# (dashboard URL, the head's token) -> a Jobs API client
RayClientFactory = Callable[[str, str], RayJobsClient]
TOKEN_KEY_UNKNOWN = "TokenKeyUnknown"


class AttemptDriver:
    def __init__(
        self,
        kube: Kube,
        config: OperatorConfig,
        metrics: Metrics,
        ray_client: RayClientFactory = RayJobsClient,
    ) -> None:
        self.kube = kube
        self.config = config
        self.metrics = metrics
        self.ray_client = ray_client
        self.ray_auth = RayAuth.load(
            config.ray_token_key_file,
            config.dashboard_token_file,
            config.ray_token_previous_keys_file,
        )
        # Per attempt (clock_key: job UID and index), dropped when the attempt ends or its job
        # is deleted (forget): memory follows the attempts in flight, not every job ever seen.
        self._unreachable_since: dict[str, datetime] = {}
        self.liveness = Liveness(config, metrics)

    def _client(
        self, state: JobState, attempt: Attempt, raycluster: dict | None = None
    ) -> RayJobsClient:
        """A client bearing the token of the attempt's head (UnknownTokenKey: a key the
        operator no longer has); ``raycluster``: the cluster as this reconcile read it."""
        url = self.dashboard_url(state, attempt.ray_cluster or "")
        if raycluster is None:
            raycluster = self.kube.get_raycluster(state.ref.namespace, attempt.ray_cluster or "")
        token = self.ray_auth.token_for(state.ref, cluster_key_id(raycluster))
        return self.ray_client(url, token)

    def forget(self, state: JobState, attempt: Attempt) -> None:
        """Drop what is kept in memory about ``attempt``: it ended, or its job is deleted."""
        self._unreachable_since.pop(clock_key(state, attempt), None)
        self.liveness.forget(state, attempt)

    def dashboard_url(self, state: JobState, cluster: str) -> str:
        if self.config.dashboard_url_override:
            return self.config.dashboard_url_override
        if state.spec is not None and state.spec.network == "hostNetwork":
            return host_network_dashboard(self.kube, state.spec, state.ref.namespace, cluster)
        return head_service_url(cluster, state.ref.namespace)

    # --- start -----------------------------------------------------------------------------

    def start(self, state: JobState) -> Attempt:
        status, job = state.status, state.ref.name
        index = status.attempts[-1].index + 1 if status.attempts else 1
        resumed = status.checkpoint.latest_step if index > 1 and status.checkpoint else None
        cluster = self._evicted_cluster(state) or raycluster_name(job, index)
        attempt = Attempt.model_validate(
            {
                "index": index,
                "submissionId": submission_id(job, index),
                "rayCluster": cluster,
                "startTime": state.timestamp(),
                "result": "Running",
                "resumedFromStep": resumed,
            }
        )
        state.add_attempt(attempt)
        status.start_time = status.start_time or state.timestamp()
        status.next_retry_time = None
        status.ray_cluster = RayClusterStatus.model_validate(
            {
                "name": cluster,
                "dashboardURL": self.dashboard_url(state, cluster),
                "rayPorts": state.spec and head_ports(state.spec, state.ref.namespace, cluster),
            }
        )
        resume = f", resuming from step {resumed}" if resumed is not None else ""
        state.set_phase("Provisioning", f"attempt {index}: creating RayCluster {cluster}{resume}")
        if cond.is_true(status, cond.RESTARTING):
            state.condition(cond.RESTARTING, False, "AttemptStarted", f"attempt {index} started")
        state.event("Normal", "AttemptStarted", state.status.message or "")
        return attempt

    def _evicted_cluster(self, state: JobState) -> str | None:
        """The RayCluster Kueue evicted the last attempt from: it keeps the job's queue place."""
        last = state.status.attempts[-1] if state.status.attempts else None
        if last is None or last.reason != kueue.EVICTED or not last.ray_cluster:
            return None
        found = self.kube.get_raycluster(state.ref.namespace, last.ray_cluster)
        return last.ray_cluster if found is not None else None

    # --- drive -----------------------------------------------------------------------------

    def drive(self, state: JobState, attempt: Attempt) -> None:
        """Move the active attempt one step: provision, submit, or poll."""
        assert attempt.ray_cluster
        self.liveness.track(state, attempt)
        namespace = state.ref.namespace
        raycluster = self.kube.get_raycluster(namespace, attempt.ray_cluster)
        if raycluster is None:
            if state.submitted(attempt):
                self.fail(state, attempt, Failure("ClusterLost", "RayCluster deleted", _INFRA))
                return
            self._create_cluster(state, attempt)
            return
        owner = (raycluster["metadata"].get("ownerReferences") or [{}])[0].get("uid")
        if owner != state.ref.uid:
            seconds = self.config.waits.stale_owner_seconds
            if failure := stale_owner_overdue(state, attempt, seconds):
                self.fail(state, attempt, failure, owns_cluster=False)  # never another's
            return
        if self._kueue_holds(state, attempt, raycluster):
            return
        self._observe_cluster(state, attempt, raycluster)
        if unknown := self.ray_auth.unknown_key(cluster_key_id(raycluster)):
            self.fail(state, attempt, Failure(TOKEN_KEY_UNKNOWN, unknown, _INFRA))
            return
        if not state.submitted(attempt) and (refused := pod_creation_failure(raycluster)):
            self.fail(state, attempt, refused)
            return
        if state.submitted(attempt):
            # The Ray job is the truth once submitted: a pod's readiness blinking (a probe, a
            # node heartbeat) must not stop us from seeing it finish, fail or lose its head.
            self._poll(state, attempt, raycluster)
        elif cond.is_true(state.status, cond.CLUSTER_READY):
            self._submit(state, attempt, raycluster)
        self._enforce_deadlines(state, attempt)

    def _enforce_deadlines(self, state: JobState, attempt: Attempt) -> None:
        if (overdue := self.liveness.overdue(state, attempt)) is not None:
            self._stop_ray_job(state, attempt)
            self.fail(state, attempt, Failure(overdue.reason, overdue.message, _INFRA))

    def _create_cluster(self, state: JobState, attempt: Attempt) -> None:
        assert attempt.ray_cluster
        body, failure = create_cluster(
            self.kube, self.config, self.ray_auth, state, attempt.ray_cluster, attempt.index
        )
        if failure is not None:
            self.fail(state, attempt, failure)
        else:
            self._kueue_holds(state, attempt, body)

    def _kueue_holds(self, state: JobState, attempt: Attempt, raycluster: dict) -> bool:
        """Kueue holds the cluster (queued, or evicted); a hold past its deadline fails."""
        if not kueue.managed(raycluster) or not kueue.observe(
            state, attempt, raycluster, self.stop
        ):
            return False
        seconds = self.config.waits.queue_seconds
        held = attempt.result == "Running"
        if held and (failure := queue_overdue(state, attempt, seconds)):
            self.fail(state, attempt, failure)
        return True

    def _observe_cluster(self, state: JobState, attempt: Attempt, raycluster: dict) -> None:
        pods = self.kube.list_pods(state.ref.namespace, f"ray.io/cluster={attempt.ray_cluster}")
        health = cluster_health(raycluster, pods)
        mirror = state.status.ray_cluster or RayClusterStatus()
        mirror.name = attempt.ray_cluster
        mirror.dashboard_url = self.dashboard_url(state, attempt.ray_cluster or "")
        mirror.state = health.state
        mirror.ready_workers = health.ready_workers
        mirror.desired_workers = health.desired_workers
        state.status.ray_cluster = mirror
        was_ready = cond.is_true(state.status, cond.CLUSTER_READY)
        state.condition(cond.CLUSTER_READY, health.ready, health.reason, health.message)
        if health.ready and not was_ready and not state.submitted(attempt):
            started = cond.parse_time(attempt.start_time)
            if started:
                self.metrics.time_to_cluster_ready.observe((state.now - started).total_seconds())
        if not health.ready and not state.submitted(attempt):
            state.set_phase("Provisioning", f"attempt {attempt.index}: {health.message}")

    # --- submit ----------------------------------------------------------------------------

    def _submit(self, state: JobState, attempt: Attempt, raycluster: dict) -> None:
        if state.effective is None or state.spec is None:
            return  # the spec turned invalid: nothing new is submitted until it is fixed
        client = self._client(state, attempt, raycluster)
        payload = build_submission(
            state.ref,
            state.spec.af_output_dir,
            state.effective,
            attempt.index,
            self.config.runtime_kubeconfig,
            stop_wait_seconds=max(STOP_WAIT_SECONDS, self.config.stop_grace_seconds),
        )
        try:
            session = client.session_name()
            if failure := unlocked_head(client, self.config, attempt.ray_cluster):
                return self.fail(state, attempt, failure)  # its token lock is off
            client.submit(payload)
        except DashboardUnavailable as err:
            self._dashboard_down(state, attempt, str(err))
            return
        except SubmissionRejected as err:
            self.fail(state, attempt, Failure("SubmissionRejected", str(err), _INFRA))
            return
        self._unreachable_since.pop(clock_key(state, attempt), None)
        state.status.ray_job = RayJobStatus.model_validate(
            {"submissionId": attempt.submission_id, "status": "PENDING", "sessionName": session}
        )
        state.set_phase("Running", f"attempt {attempt.index}: submitted {attempt.submission_id}")
        state.condition(cond.RUNNING, False, "Pending", f"submitted {attempt.submission_id}")
        state.event("Normal", "Submitted", f"Ray job {attempt.submission_id} submitted")

    def _dashboard_down(self, state: JobState, attempt: Attempt, error: str) -> None:
        since = self._unreachable_since.setdefault(clock_key(state, attempt), state.now)
        waited = (state.now - since).total_seconds()
        if waited >= self.config.dashboard_grace_seconds:
            self._unreachable_since.pop(clock_key(state, attempt), None)
            message = f"Ray dashboard unreachable for {waited:.0f}s: {error}"
            self.fail(state, attempt, Failure("DashboardUnreachable", message, _INFRA))
        else:
            state.status.message = f"attempt {attempt.index}: waiting for the Ray dashboard"

    # --- poll ------------------------------------------------------------------------------

    def _poll(self, state: JobState, attempt: Attempt, raycluster: dict) -> None:
        ray_job = state.status.ray_job
        assert ray_job is not None
        sid = attempt.submission_id
        client = self._client(state, attempt, raycluster)
        try:
            session = client.session_name()
            info = client.get(sid)
        except DashboardUnavailable as err:
            self._dashboard_down(state, attempt, str(err))
            return
        self._unreachable_since.pop(clock_key(state, attempt), None)
        if ray_job.session_name and session != ray_job.session_name:
            message = f"Ray session changed from {ray_job.session_name} to {session}"
            self.fail(state, attempt, Failure("HeadRestarted", message, _INFRA))
            return
        if info is None:
            message = f"the Ray head no longer knows job {sid}"
            self.fail(state, attempt, Failure("HeadRestarted", message, _INFRA))
            return
        owner = info.metadata.get("kuberl.io/uid")
        if owner and owner != state.ref.uid:
            message = f"submission id {sid} belongs to another job (uid {owner})"
            self.fail(state, attempt, Failure("SubmissionIdConflict", message, _INFRA))
            return
        ray_job.status, ray_job.message = info.status, info.message or None
        ray_job.start_time = _ms_to_iso(info.start_time)
        ray_job.end_time = _ms_to_iso(info.end_time)
        if info.status == "PENDING":
            state.condition(cond.RUNNING, False, "Pending", info.message)
        elif info.status == "RUNNING":
            state.set_phase("Running", f"attempt {attempt.index}: training")
            state.condition(cond.RUNNING, True, "RayJobRunning", f"Ray job {sid} is running")
        elif info.status == "SUCCEEDED":
            attempt.result, attempt.end_time = "Succeeded", state.timestamp()
            self.forget(state, attempt)
            state.finish(True, "RayJobSucceeded", f"attempt {attempt.index} succeeded")
        else:
            failure = classify_ray_failure(info, client.logs_tail(sid))
            self.fail(state, attempt, failure)

    # --- end -------------------------------------------------------------------------------

    def stop(self, state: JobState, attempt: Attempt, reason: str) -> None:
        """Stop the attempt on purpose (suspend, deadline): not a failure, no retry budget."""
        self._stop_ray_job(state, attempt)
        attempt.result, attempt.reason, attempt.end_time = "Stopped", reason, state.timestamp()
        self.forget(state, attempt)
        state.event("Normal", "AttemptStopped", f"attempt {attempt.index} stopped: {reason}")

    def _stop_ray_job(self, state: JobState, attempt: Attempt) -> None:
        if not state.submitted(attempt):
            return
        try:
            self._client(state, attempt).stop(attempt.submission_id)
        except (DashboardUnavailable, UnknownTokenKey) as err:
            log.warning("could not stop %s: %s", attempt.submission_id, err)

    def ray_job(self, state: JobState, attempt: Attempt) -> JobInfo | None:
        """The attempt's Ray job as its head reports it now (None: the head does not know it).
        Raises DashboardUnavailable or UnknownTokenKey when the head cannot be asked."""
        return self._client(state, attempt).get(attempt.submission_id)

    def fail(
        self, state: JobState, attempt: Attempt, failure: Failure, owns_cluster: bool = True
    ) -> None:
        status = state.status
        self.forget(state, attempt)
        attempt.result, attempt.end_time = "Failed", state.timestamp()
        attempt.reason, attempt.message = failure.reason, failure.message[:1000]
        attempt.failure_class = failure.cls.value
        previous = state.previous_attempt()
        previous_stuck = (
            previous is not None
            and previous.failure_class == FailureClass.APP.value
            and previous.last_step is None
        )
        verdict = retry_verdict(
            failure,
            failed_attempts=status.restarts + 1,
            backoff_limit=state.run_policy.backoff_limit,
            made_progress=attempt.last_step is not None,
            previous_failure_without_progress=previous_stuck,
        )
        text = f"attempt {attempt.index} failed ({failure.reason}): {failure.message}"
        state.event("Warning", "AttemptFailed", text[:1000])
        if not verdict.retry:
            state.finish(False, verdict.reason, text)
            return
        status.restarts += 1
        delay = backoff_seconds(status.restarts, self.config.backoff_base, self.config.backoff_max)
        status.next_retry_time = cond.isoformat(state.now + timedelta(seconds=delay))
        self.metrics.restarts.labels(state.ref.namespace, state.ref.name).inc()
        state.set_phase("Restarting", f"{text}; retrying in {delay:.0f}s")
        state.condition(cond.RUNNING, False, failure.reason, failure.message)
        state.condition(
            cond.RESTARTING,
            True,
            "BackoffWaiting",
            f"restart {status.restarts}/{state.run_policy.backoff_limit} in {delay:.0f}s",
        )
        if attempt.ray_cluster and owns_cluster:
            self.kube.delete_raycluster(state.ref.namespace, attempt.ray_cluster)


_INFRA = FailureClass.INFRA


def cluster_key_id(raycluster: dict | None) -> str | None:
    """The Ray token key id a RayCluster's ``authOptions.secretName`` carries, read from the
    cluster each time rather than kept in a map that would outlive it (None: no cluster, or one
    made before key ids: the current key)."""
    if raycluster is None:
        return None
    secret = ((raycluster.get("spec") or {}).get("authOptions") or {}).get("secretName")
    return token_key_id(secret or "")


def _ms_to_iso(millis: int | None) -> str | None:
    if not millis:
        return None
    return cond.isoformat(datetime.fromtimestamp(millis / 1000, tz=UTC))
