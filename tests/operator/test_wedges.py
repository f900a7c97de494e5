"""Wedges: a large spec keeps kopf's bookkeeping annotation small; a reconcile that raises is
reported as an event and retried with backoff."""

from typing import Any

import kopf
from kopf._cogs.structs import bodies, patches

from kuberl_operator.config import OperatorConfig
from kuberl_operator.handlers import build_settings
from kuberl_operator.wedges import DigestDiffBaseStorage, ErrorBackoff, error_message

ANNOTATION_LIMIT = 256 * 1024  # the API server's total for metadata.annotations


def _body(env_value: str, annotations: dict[str, str] | None = None) -> bodies.Body:
    raw: dict[str, Any] = {
        "apiVersion": "kuberl.io/v1alpha1",
        "kind": "RLTrainingJob",
        "metadata": {
            "name": "big",
            "namespace": "ns",
            "uid": "u",
            "annotations": annotations or {},
        },
        "spec": {"env": [{"name": f"V{i}", "value": env_value} for i in range(40)]},
        "status": {"phase": "Running"},
    }
    return bodies.Body(raw)


def _stored(storage: kopf.DiffBaseStorage, body: bodies.Body) -> str:
    patch = patches.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    (value,) = [v for k, v in patch["metadata"]["annotations"].items() if "digest" in k]
    return value


def test_a_spec_far_over_the_annotation_limit_stores_a_digest() -> None:
    storage = build_settings(OperatorConfig()).persistence.diffbase_storage
    assert isinstance(storage, DigestDiffBaseStorage)
    big = _body("x" * 8192)  # 40 x 8 KiB: over 256 KiB, the size that wedged deletion
    stored = _stored(storage, big)
    assert len(stored) < 200 < ANNOTATION_LIMIT
    # Stored, fetched back and compared with a fresh build: unchanged means equal.
    handled = _body("x" * 8192, {"kuberl.io/last-handled-digest": stored})
    assert storage.fetch(body=handled) == storage.build(body=handled) == storage.build(body=big)
    assert storage.build(body=_body("y" * 8192)) != storage.build(body=big)


def test_failing_reconciles_back_off_exponentially_and_reset() -> None:
    now = [0.0]
    backoff = ErrorBackoff(10, 60, clock=lambda: now[0])
    assert backoff.due("ns/j")
    assert [backoff.failed("ns/j") for _ in range(5)] == [10, 20, 40, 60, 60]
    assert not backoff.due("ns/j")
    now[0] = 59.9
    assert not backoff.due("ns/j")
    now[0] = 60.0
    assert backoff.due("ns/j")
    backoff.succeeded("ns/j")
    assert backoff.failed("ns/j") == 10
    assert backoff.due("other/j")


def test_error_events_are_redacted() -> None:
    message = error_message(RuntimeError("HF_TOKEN=hf_abcdefghijklmnopqrstuvwx leaked"), 20)
    assert "hf_abcdefghijklmnopqrstuvwx" not in message
    assert message.startswith("reconcile failed, retrying in 20s: RuntimeError")
