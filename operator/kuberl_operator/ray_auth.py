"""Ray token authentication: every head kuberl creates answers only requests bearing its token.

The token of a job is HMAC-SHA256(operator key, "<namespace>/<job>/<uid>"): the operator writes
it once into the job's Secret (which KubeRay's ``authOptions`` hands to every Ray container as
RAY_AUTH_TOKEN) and derives it again for each Jobs API call, so it needs ``create`` on Secrets
but never ``get``, and a restarted operator computes the same token. The key is a file the chart
mounts from its own Secret (``--ray-token-key-file``); without one the operator makes a random
key for its lifetime and says so (tokens then change on restart, and running heads refuse it).

Rotation: each key has an id (a digest of it, not the key), and a job's Secret is named after the
key its token came from (``<job>-ray-token-<key id>``), as is the RayCluster's
``authOptions.secretName``. A running cluster keeps its Secret; the next attempt of the job gets
a Secret of the current key. The operator reads the key id from the cluster's ``secretName`` and
derives the token from that key: the current one, or one of ``--ray-token-previous-keys-file``
(one per line) kept after a rotation until no cluster uses it. A cluster whose key the operator
no longer has is named (``TokenKeyUnknown``) and its attempt retried with the current key. A
cluster whose ``secretName`` carries no key id (made before key ids) uses the current key.
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
KEY_ID_CHARS = 10
HEAD_UNAUTHENTICATED = "HeadUnauthenticated"


class RayAuthError(RuntimeError):
    """The operator's token key is unusable."""


def derive_token(key: bytes, job: JobRef) -> str:
    message = f"{job.namespace}/{job.name}/{job.uid}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def key_id(key: bytes) -> str:
    """A name for ``key`` that reveals nothing of it (a digest of a 32+ byte random key)."""
    return hashlib.sha256(b"kuberl-ray-token-key:" + key).hexdigest()[:KEY_ID_CHARS]


class UnknownTokenKey(RayAuthError):
    """A cluster's token came from a key this operator does not have (a rotation dropped it)."""


class RayAuth:
    """The token of each job's head; one fixed token when every job shares one head (tests)."""

    def __init__(
        self,
        key: bytes,
        shared_token: str | None = None,
        previous: tuple[bytes, ...] = (),
        ephemeral: bool = False,
    ) -> None:
        for each in (key, *previous):
            if len(each) < MIN_KEY_BYTES:
                raise RayAuthError(f"a Ray token key has {len(each)} bytes; use {MIN_KEY_BYTES}+")
        self._key = key
        self.current_id = key_id(key)
        self._keys = {key_id(k): k for k in previous} | {self.current_id: key}
        self._shared_token = shared_token
        self._ephemeral = ephemeral
        """A key made up for this process (no key file): every cluster is called with it."""

    def knows(self, cluster_key_id: str | None) -> bool:
        return self._ephemeral or cluster_key_id is None or cluster_key_id in self._keys

    def token_for(self, job: JobRef, cluster_key_id: str | None = None) -> str:
        """What the operator sends to the job's head (``x-ray-authorization: Bearer ...``):
        derived from the key that made the head's Secret (``cluster_key_id``; None: current)."""
        if self._shared_token:
            return self._shared_token
        if problem := self.unknown_key(cluster_key_id):
            raise UnknownTokenKey(problem)
        return derive_token(self._keys.get(cluster_key_id or "", self._key), job)

    def unknown_key(self, cluster_key_id: str | None) -> str | None:
        """Why no token can be derived for a cluster of key ``cluster_key_id``; None if one can."""
        if self.knows(cluster_key_id):
            return None
        return (
            f"the RayCluster's token was derived from Ray token key {cluster_key_id}, which this "
            f"operator no longer has (it has {', '.join(sorted(self._keys))}); the next attempt "
            "uses the current key. To keep running clusters through a key change, keep the old "
            "key in --ray-token-previous-keys-file (the chart's rayTokenKey.rotation does) until "
            "no cluster uses it"
        )

    def secret_token(self, job: JobRef) -> str:
        """What a new Secret of the job holds: its own token from the current key."""
        return derive_token(self._key, job)

    @classmethod
    def load(
        cls,
        key_file: str | None,
        shared_token_file: str | None = None,
        previous_keys_file: str | None = None,
    ) -> "RayAuth":
        shared = _read(shared_token_file).decode().strip() if shared_token_file else None
        previous = _previous_keys(previous_keys_file) if previous_keys_file else ()
        if key_file:
            return cls(_read(key_file).strip(), shared, previous)
        log.warning(
            "no --ray-token-key-file: Ray head tokens come from a random key that lives as long "
            "as this process; after a restart running heads refuse the operator (the chart "
            "always mounts a key)"
        )
        return cls(secrets.token_bytes(MIN_KEY_BYTES), shared, previous, ephemeral=True)


def _previous_keys(path: str) -> tuple[bytes, ...]:
    """One key per line; blank lines are skipped. An empty or absent file: no previous key (a
    key Secret without a ``previous`` entry mounts no such file)."""
    if not Path(path).exists():
        log.info("no previous Ray token keys: %s does not exist", path)
        return ()
    return tuple(line.strip() for line in _read(path).splitlines() if line.strip())


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
