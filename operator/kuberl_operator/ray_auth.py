"""Ray token authentication: every head kuberl creates answers only requests bearing its token.

The token of a job is HMAC-SHA256(operator key, "<namespace>/<job>/<uid>"): the operator writes
it once into the job's Secret (which KubeRay's ``authOptions`` hands to every Ray container as
RAY_AUTH_TOKEN) and derives it again for each Jobs API call, so it needs ``create`` on Secrets
but never ``get``, and a restarted operator computes the same token. The key is a file the chart
mounts from its own Secret (``--ray-token-key-file``); without one the operator makes a random
key for its lifetime and says so (tokens then change on restart, and running heads refuse it).
"""

import hashlib
import hmac
import logging
import secrets
from pathlib import Path
from typing import Protocol

from kuberl_operator.builders.common import JobRef
from kuberl_operator.config import OperatorConfig
from kuberl_operator.failures import Failure, FailureClass

log = logging.getLogger(__name__)

MIN_KEY_BYTES = 32
HEAD_UNAUTHENTICATED = "HeadUnauthenticated"


class RayAuthError(RuntimeError):
    """The operator's token key is unusable."""


def derive_token(key: bytes, job: JobRef) -> str:
    message = f"{job.namespace}/{job.name}/{job.uid}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


class RayAuth:
    """The token of each job's head; one fixed token when every job shares one head (tests)."""

    def __init__(self, key: bytes, shared_token: str | None = None) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise RayAuthError(f"the Ray token key has {len(key)} bytes; use {MIN_KEY_BYTES}+")
        self._key = key
        self._shared_token = shared_token

    def token_for(self, job: JobRef) -> str:
        """What the operator sends to the job's head (``x-ray-authorization: Bearer ...``)."""
        return self._shared_token or derive_token(self._key, job)

    def secret_token(self, job: JobRef) -> str:
        """What the job's Secret holds: its own token, never a shared one."""
        return derive_token(self._key, job)

    @classmethod
    def load(cls, key_file: str | None, shared_token_file: str | None = None) -> "RayAuth":
        shared = _read(shared_token_file).decode().strip() if shared_token_file else None
        if key_file:
            return cls(_read(key_file).strip(), shared)
        log.warning(
            "no --ray-token-key-file: Ray head tokens come from a random key that lives as long "
            "as this process; after a restart running heads refuse the operator (the chart "
            "always mounts a key)"
        )
        return cls(secrets.token_bytes(MIN_KEY_BYTES), shared)


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise RayAuthError(f"cannot read {path}: {err}") from err


class _Probe(Protocol):
    def refuses_anonymous(self) -> bool: ...


def unlocked_head(client: _Probe, config: OperatorConfig, cluster: str | None) -> Failure | None:
    """``HeadUnauthenticated`` when the head answers a Jobs API request without its token: its
    lock is off (a KubeRay without ``authOptions``, a Ray image before token authentication).
    Nothing is submitted, and a retry would meet the same head: the job fails. A developer's
    ``--dashboard-url-override`` head without ``--dashboard-token-file`` is not checked."""
    if config.dashboard_url_override and not config.dashboard_token_file:
        return None
    if client.refuses_anonymous():
        return None
    return Failure(
        HEAD_UNAUTHENTICATED,
        f"the Ray head of {cluster} answered a request without its token, so anyone who "
        "reaches it could run code as the job; nothing was submitted. Use a KubeRay whose "
        "RayCluster has spec.authOptions and a Ray >= 2.52 image",
        FailureClass.CONFIG,
    )
