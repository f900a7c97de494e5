"""Deterministic names of everything one job owns, so a restarted operator finds, not duplicates.

RayCluster ``<job>-a<N>`` and submission id ``<job>-<N>`` for attempt N; the runtime's
ServiceAccount, Role and RoleBinding share ``<job>-runtime``; the head's token Secret is
``<job>-ray-token`` and its NetworkPolicy ``<job>-ray``.
"""

import hashlib

LABEL_JOB = "kuberl.io/job"
LABEL_ATTEMPT = "kuberl.io/attempt"
LABEL_QUEUE = "kueue.x-k8s.io/queue-name"
FINALIZER = "kuberl.io/finalizer"
ANNOTATION_PREFIX = "kuberl.io"

# RayCluster names become Service names (<cluster>-head-svc) and pod name prefixes: DNS-1035
# labels of at most 63 characters, with room left for KubeRay's suffixes.
_MAX_CLUSTER_NAME = 40


_DIGEST = 10
"""Hex digits of the name's SHA-1 kept in a shortened name: 40 bits, so even thousands of jobs
sharing one long prefix do not meet."""


def _shorten(name: str, limit: int) -> str:
    """``name`` if it is short, else a prefix and a digest, exactly ``limit`` characters.

    A name is kept only up to ``limit - _DIGEST - 1`` characters, and a shortened one is always
    ``limit`` long, so no job's own name can equal another job's shortened twin (a job named
    like the shortened form of a longer one would otherwise share its RayCluster).
    """
    keep = limit - _DIGEST - 1
    if len(name) <= keep:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:_DIGEST]
    return f"{name[:keep]}-{digest}"  # "--" is allowed inside a DNS label


_TOKEN_SUFFIX = "-ray-token"


def raycluster_name(job: str, attempt: int) -> str:
    suffix = f"-a{attempt}"
    return _shorten(job, _MAX_CLUSTER_NAME - len(suffix)) + suffix


def submission_id(job: str, attempt: int) -> str:
    return f"{job}-{attempt}"


def runtime_account_name(job: str) -> str:
    return _shorten(job, 245) + "-runtime"


def ray_token_secret_name(job: str, key_id: str | None = None) -> str:
    """``<job>-ray-token-<key id>``: one Secret per job and Ray token key (ray_auth.py);
    ``<job>-ray-token`` without a key id (clusters made before key ids)."""
    if key_id is None:
        return _shorten(job, 242) + _TOKEN_SUFFIX
    return _shorten(job, 252 - len(_TOKEN_SUFFIX) - len(key_id)) + f"{_TOKEN_SUFFIX}-{key_id}"


def token_key_id(secret_name: str) -> str | None:
    """The key id a ``ray_token_secret_name`` carries; None for the name without one."""
    head, found, tail = secret_name.rpartition(_TOKEN_SUFFIX + "-")
    return tail if found and head and "-" not in tail else None


def network_policy_name(job: str) -> str:
    return _shorten(job, 245) + "-ray"


def head_service_url(cluster: str, namespace: str, port: int = 8265) -> str:
    return f"http://{cluster}-head-svc.{namespace}.svc:{port}"
