"""Leader election: of all operators started on one cluster, one acts; the others wait.

A second operator (a second release, `kubectl scale`, a local `kuberl operator`) would reconcile
every job a second time and fail running attempts, so each operator first takes a
coordination.k8s.io Lease (by default `kuberl-operator` in the operator's namespace, see
`lease_namespace`) and only
then starts kopf. Why a Lease and not kopf's peering: peering pauses the lower-priority operator
only after it has seen the other's keep-alive, so two operators starting together both act
until then, and two with equal priority both pause; a Lease is taken with the API server's
optimistic concurrency (resourceVersion), so at most one process holds it at any instant.

The semantics are client-go's leaderelection: the holder renews every `retry_s`; a waiting
operator takes the Lease once its record has not changed for `leaseDurationSeconds` of the
waiter's own clock (never comparing two machines' clocks); a holder that cannot renew within
`renew_deadline_s` exits at once (the process restarts and waits like any other), which is
before any waiter may take over (`renew_deadline_s` < duration). A clean stop releases the
Lease so the next operator starts without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DISABLED = "none"
CHART_NAMESPACE = "kuberl-system"
"""The namespace the chart's README installs it into."""


@dataclass(frozen=True)
class LeaseSettings:
    namespace: str
    name: str
    identity: str
    duration_s: int = 15
    renew_deadline_s: float = 10.0
    retry_s: float = 2.0


def lease_namespace(
    configured: str | None,
    operator_namespace: str | None,
    environ: Mapping[str, str] = os.environ,
    sa_file: Path = SA_NAMESPACE_FILE,
) -> str:
    """Where the Lease lives: the flag, else the operator's namespace, else `POD_NAMESPACE`, else
    the pod's own (in a cluster), else the kubeconfig context's namespace, else the chart's
    default namespace (`kuberl-system`, where the README installs the chart and its Role grants
    the Lease): an operator run on a laptop against an installed chart finds the chart's Lease
    instead of looking in `default`, where nothing is granted."""
    for candidate in (configured, operator_namespace, environ.get("POD_NAMESPACE")):
        if candidate:
            return candidate
    if sa_file.is_file():
        return sa_file.read_text().strip()
    return kubeconfig_namespace(environ.get("KUBECONFIG")) or CHART_NAMESPACE


def kubeconfig_namespace(path: str | None) -> str | None:
    """The namespace of the kubeconfig's current context ($KUBECONFIG's files merged as kubectl
    does, else ~/.kube/config), or None when it sets none or there is no kubeconfig to read."""
    try:
        _, active = kube_config.list_kube_config_contexts(config_file=path or None)
    except (kube_config.ConfigException, OSError):
        return None
    return ((active or {}).get("context") or {}).get("namespace") or None


def new_identity() -> str:
    """Unique per process: two operators on one host (or one pod restarted) are two holders."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _micro_time(value: datetime.datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseForbidden(RuntimeError):
    """The operator may not read or write its Lease: a setup error, not something to wait out."""


class LeaderLease:
    def __init__(
        self,
        api: client.ApiClient,
        settings: LeaseSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.leases = client.CoordinationV1Api(api)
        self.settings = settings
        self.clock = clock
        self.holder: str | None = None
        """The holder last seen (for the waiting message)."""
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        # Its own thread: a pool busy with reconciles must never delay a renewal.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="leader-lease")

    def try_acquire_or_renew(self) -> bool:
        """One round: True while this process holds the Lease."""
        s = self.settings
        try:
            lease = self.leases.read_namespaced_lease(s.name, s.namespace, _request_timeout=5)
        except ApiException as err:
            if err.status != 404:
                raise
            return self._write(None, transitions=0, acquired=_now())
        spec = lease.spec
        record = (spec.holder_identity, spec.renew_time, spec.lease_transitions)
        if record != self._observed:
            self._observed, self._observed_at = record, self.clock()
        self.holder = spec.holder_identity
        mine = spec.holder_identity == s.identity
        duration = spec.lease_duration_seconds or s.duration_s
        expired = not spec.holder_identity or self.clock() - self._observed_at > duration
        if not (mine or expired):
            return False
        transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
        acquired = spec.acquire_time if mine and spec.acquire_time else _now()
        return self._write(lease.metadata.resource_version, transitions, acquired)

    def _write(self, version: str | None, transitions: int, acquired: datetime.datetime) -> bool:
        s = self.settings
        now = _now()
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": s.name, "namespace": s.namespace},
            "spec": {
                "holderIdentity": s.identity,
                "leaseDurationSeconds": s.duration_s,
                "acquireTime": _micro_time(acquired),
                "renewTime": _micro_time(now),
                "leaseTransitions": transitions,
            },
        }
        try:
            if version is None:
                self.leases.create_namespaced_lease(s.namespace, body, _request_timeout=5)
            else:
                body["metadata"]["resourceVersion"] = version
                self.leases.replace_namespaced_lease(s.name, s.namespace, body, _request_timeout=5)
        except ApiException as err:
            if err.status == 409:  # another operator wrote first
                return False
            raise
        return True

    def release(self) -> None:
        """Hand the Lease over now (a clean stop): the record says nobody holds it."""
        s = self.settings
        lease = self.leases.read_namespaced_lease(s.name, s.namespace, _request_timeout=5)
        if lease.spec.holder_identity != s.identity:
            return
        lease.spec.holder_identity = None
        lease.spec.lease_duration_seconds = 1
        self.leases.replace_namespaced_lease(s.name, s.namespace, lease, _request_timeout=5)
        log.info("released Lease %s/%s", s.namespace, s.name)

    async def _round(self) -> bool:
        loop = asyncio.get_running_loop()
        s = self.settings
        try:
            return await loop.run_in_executor(self._executor, self.try_acquire_or_renew)
        except ApiException as err:
            if err.status == 403:
                raise LeaseForbidden(
                    f"leader election: Lease {s.namespace}/{s.name} is forbidden ({err.reason}): "
                    "grant get/create/update on coordination.k8s.io leases in that namespace "
                    "(the chart's <release>-leader-election Role does), or pick another with "
                    "--leader-election-namespace"
                ) from err
            log.warning("Lease %s/%s: %s", s.namespace, s.name, err)
            return False
        except OSError as err:
            log.warning("Lease %s/%s: %s", self.settings.namespace, self.settings.name, err)
            return False

    async def acquire(self) -> None:
        """Return once this process holds the Lease."""
        s = self.settings
        waiting_for: str | None = None
        while not await self._round():
            if self.holder != waiting_for:
                waiting_for = self.holder
                log.info(
                    "standing by: Lease %s/%s is held by %s; this operator (%s) acts once it "
                    "expires or is released",
                    *(s.namespace, s.name, self.holder, s.identity),
                )
            await asyncio.sleep(s.retry_s)
        log.info("leading: holds Lease %s/%s as %s", s.namespace, s.name, s.identity)

    async def keep(self, on_lost: Callable[[], None]) -> None:
        """Renew every `retry_s`; call `on_lost` once renewing failed for `renew_deadline_s`."""
        s = self.settings
        renewed = self.clock()
        while True:
            await asyncio.sleep(s.retry_s)
            if await self._round():
                renewed = self.clock()
            elif self.clock() - renewed > s.renew_deadline_s:
                log.error(
                    "lost Lease %s/%s (not renewed for %.0f s, held by %s now): exiting so that "
                    "two operators never act at once",
                    *(s.namespace, s.name, self.clock() - renewed, self.holder),
                )
                on_lost()
                return

    async def release_quietly(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self.release)
        except (ApiException, OSError) as err:
            log.warning("could not release the Lease: %s", err)
        self._executor.shutdown(wait=False)


def exit_now() -> None:
    """Stop acting at once: no handler may run after the Lease is lost."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(1)


@contextlib.asynccontextmanager
async def standby_health(endpoint: str | None) -> AsyncIterator[None]:
    """Answer the liveness probe while waiting for the Lease (kopf's own endpoint starts with
    kopf), so a standby operator is not restarted for waiting."""
    if not endpoint:
        yield
        return
    url = urlsplit(endpoint)

    async def healthz(_request: web.Request) -> web.Response:
        return web.json_response({"leader": False})

    app = web.Application()
    app.router.add_get(url.path or "/", healthz)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, url.hostname, url.port).start()
    try:
        yield
    finally:
        await runner.cleanup()
