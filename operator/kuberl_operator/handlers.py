"""kopf wiring: every cause and the timer call the same ``Reconciler.reconcile``.

Handlers stay thin. kopf keeps its bookkeeping in annotations (the status schema is structural
and would prune ``status.kopf``), under kuberl.io/ keys and with kuberl's own finalizer.
"""

import logging
from typing import Any

import kopf

from kuberl_api.job import GROUP, PLURAL, VERSION
from kuberl_operator import conditions as cond
from kuberl_operator.config import OperatorConfig
from kuberl_operator.names import ANNOTATION_PREFIX, FINALIZER
from kuberl_operator.reconcile import Reconciler
from kuberl_operator.state import INVALID_SPEC, TERMINAL_PHASES, Event
from kuberl_operator.wedges import DigestDiffBaseStorage, ErrorBackoff, error_message

log = logging.getLogger(__name__)
RESOURCE = (GROUP, VERSION, PLURAL)


def build_settings(config: OperatorConfig) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
        prefix=ANNOTATION_PREFIX
    )
    # A digest, not the spec: a large spec never hits the annotation size limit (wedges.py).
    settings.persistence.diffbase_storage = DigestDiffBaseStorage(
        prefix=ANNOTATION_PREFIX, key="last-handled-digest"
    )
    settings.execution.max_workers = config.max_workers
    settings.posting.level = logging.WARNING  # our own events carry the story; not kopf's logs
    settings.watching.server_timeout = 300
    # Namespaced: the chart grants no cluster-wide list of namespaces or CRDs, and kopf's
    # resource scan would retry its 403s for about a minute before the first watch starts.
    settings.scanning.disabled = bool(config.namespaces)
    return settings


def needs_polling(spec: Any, status: Any, **_: Any) -> bool:
    """The timer runs for jobs still in flight, and for finished ones only while a
    ttlSecondsAfterFinished is pending; everything else finished is left alone (changes to
    it still arrive as watch events)."""
    phase = (status or {}).get("phase")
    if phase not in TERMINAL_PHASES:
        return True
    failed = next((c for c in (status or {}).get("conditions") or [] if c["type"] == "Failed"), {})
    if failed.get("reason") == INVALID_SPEC:
        return True  # a spec that failed validation may be fixed; keep reconciling it
    ttl = ((spec or {}).get("runPolicy") or {}).get("ttlSecondsAfterFinished")
    return ttl is not None


def post_event(body: dict[str, Any], event: Event) -> None:
    kopf.event(body, type=event.type, reason=event.reason, message=event.message)


def register(registry: kopf.OperatorRegistry, reconciler: Reconciler, config: OperatorConfig):
    backoff = ErrorBackoff(config.poll_interval, config.backoff_max)

    def run(namespace: str, name: str, cause: str, body: Any = None) -> None:
        key = f"{namespace}/{name}"
        if cause == "timer" and not backoff.due(key):
            return
        try:
            reconciler.reconcile(namespace, name)
        except Exception as err:
            # Never crash and never let kopf retry on its own: reported, retried with backoff.
            delay = backoff.failed(key)
            log.exception("reconcile %s (%s) failed; next try in %.0fs", key, cause, delay)
            message = error_message(err, delay)
            reconciler.report_error(namespace, name, message)
            if body is not None:
                post_event(dict(body), Event("Warning", cond.RECONCILE_ERROR, message))
        else:
            backoff.succeeded(key)

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        return kopf.login_via_client(**kwargs)  # in-cluster account, else $KUBECONFIG

    @kopf.on.create(*RESOURCE, registry=registry)
    def on_create(namespace: str, name: str, body: kopf.Body, **_: Any) -> None:
        run(namespace, name, "create", body)

    @kopf.on.update(*RESOURCE, registry=registry)
    def on_update(namespace: str, name: str, body: kopf.Body, **_: Any) -> None:
        run(namespace, name, "update", body)

    @kopf.on.resume(*RESOURCE, registry=registry)
    def on_resume(namespace: str, name: str, body: kopf.Body, **_: Any) -> None:
        run(namespace, name, "resume", body)

    @kopf.timer(*RESOURCE, interval=config.poll_interval, when=needs_polling, registry=registry)
    def on_timer(namespace: str, name: str, body: kopf.Body, **_: Any) -> None:
        run(namespace, name, "timer", body)

    @kopf.on.delete(*RESOURCE, registry=registry)
    def on_delete(body: kopf.Body, **_: Any) -> None:
        backoff.succeeded(f"{body.metadata.namespace}/{body.metadata.name}")  # its memory goes
        try:
            reconciler.finalize(dict(body))
        except Exception:
            log.exception("finalizing %s/%s failed", body.metadata.namespace, body.metadata.name)

    @kopf.on.probe(id="reconciles", registry=registry)
    def probe(**_: Any) -> int:
        return int(sum(s.value for s in _samples(reconciler, "controller_runtime_reconcile_total")))


def _samples(reconciler: Reconciler, name: str) -> list[Any]:
    return [
        sample
        for metric in reconciler.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == name
    ]
