"""Ray Jobs API calls off kopf's worker threads, each with a deadline.

kopf runs sync handlers on a small thread pool. A head that accepts connections and never
answers (a black-holing NetworkPolicy, a wedged dashboard) used to hold one of those threads for
the client's whole socket timeout on every poll, so a handful of such heads starved every other
job. Here each call runs on the gateway's own pool; the reconcile waits at most ``call_timeout``
and otherwise sees ``DashboardUnavailable`` (which the dashboard grace period already handles).
While a call to a head is still outstanding, further calls to that head fail at once instead of
queueing behind it; a head whose last call was slow and failed is skipped for ``cooldown``
seconds. Fast answers, including fast refusals, never trip either guard. The call itself ends
by the client's total deadline (http_deadline.py: connect + whole answer), so the thread a slow
head holds is freed too, not only the reconcile that gave up on it.
"""

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from kuberl_operator.ray_jobs import DashboardUnavailable, JobInfo

log = logging.getLogger(__name__)
T = TypeVar("T")
LOG_CALL_SECONDS = 15.0


class RayGateway:
    def __init__(
        self,
        call_timeout: float = 5.0,
        cooldown: float = 30.0,
        workers: int = 32,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.call_timeout = call_timeout
        self.cooldown = cooldown
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ray-api")
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()
        self._slow_failure_at: dict[str, float] = {}

    def wrap(self, factory: Callable[..., Any]) -> Callable[..., "GuardedRayClient"]:
        """A client factory with the same arguments whose clients go through this gateway."""

        def make(url: str, *args: Any, **kwargs: Any) -> GuardedRayClient:
            return GuardedRayClient(self, url, factory(url, *args, **kwargs))

        return make

    def call(self, head: str, what: str, fn: Callable[[], T], timeout: float | None = None) -> T:
        self._admit(head, what)
        started = self.clock()
        future: Future[T] = self._pool.submit(fn)
        try:
            return future.result(timeout=timeout or self.call_timeout)
        except FutureTimeout:
            with self._lock:
                self._in_flight.add(head)
            future.add_done_callback(lambda f: self._settled(head, f, started))
            raise DashboardUnavailable(
                f"{what}: no answer from {head} within {self.call_timeout:.0f}s"
            ) from None

    def _admit(self, head: str, what: str) -> None:
        with self._lock:
            if head in self._in_flight:
                raise DashboardUnavailable(f"{what}: an earlier call to {head} is still waiting")
            failed_at = self._slow_failure_at.get(head)
            if failed_at is not None and self.clock() - failed_at < self.cooldown:
                raise DashboardUnavailable(
                    f"{what}: {head} did not answer recently; retried after {self.cooldown:.0f}s"
                )

    def _settled(self, head: str, future: Future[Any], started: float) -> None:
        with self._lock:
            self._in_flight.discard(head)
            if future.exception() is not None:
                now = self.clock()
                # Past the cooldown an entry means nothing: drop those of heads never called again
                # (deleted clusters), so the map holds only heads that failed slow recently.
                expired = [
                    h for h, at in self._slow_failure_at.items() if now - at >= self.cooldown
                ]
                for gone in expired:
                    del self._slow_failure_at[gone]
                self._slow_failure_at[head] = now
            else:
                self._slow_failure_at.pop(head, None)
        log.info("slow call to %s settled after %.0fs", head, self.clock() - started)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class GuardedRayClient:
    """The ``RayJobsClient`` interface, each call through the gateway."""

    def __init__(self, gateway: RayGateway, head: str, inner: Any) -> None:
        self._gateway, self._head, self._inner = gateway, head, inner

    def session_name(self) -> str | None:
        return self._gateway.call(self._head, "GET /api/version", self._inner.session_name)

    def refuses_anonymous(self) -> bool:
        return self._gateway.call(
            self._head, "GET /api/version without a token", self._inner.refuses_anonymous
        )

    def submit(self, payload: dict[str, Any]) -> str:
        return self._gateway.call(
            self._head, "POST /api/jobs/", lambda: self._inner.submit(payload)
        )

    def get(self, submission_id: str) -> JobInfo | None:
        return self._gateway.call(
            self._head, f"GET /api/jobs/{submission_id}", lambda: self._inner.get(submission_id)
        )

    def stop(self, submission_id: str) -> bool:
        return self._gateway.call(
            self._head, f"stop {submission_id}", lambda: self._inner.stop(submission_id)
        )

    def logs_tail(self, submission_id: str, *args: Any, **kwargs: Any) -> str:
        """Best effort: without the log, a failure is explained from the job status alone."""
        try:
            return self._gateway.call(
                self._head,
                f"logs of {submission_id}",
                lambda: self._inner.logs_tail(submission_id, *args, **kwargs),
                timeout=max(self._gateway.call_timeout, LOG_CALL_SECONDS),
            )
        except DashboardUnavailable as err:
            log.warning("no log tail for %s: %s", submission_id, err)
            return ""
