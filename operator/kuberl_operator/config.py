"""How one operator process runs: flags, each with an environment variable behind it."""

import argparse
import os
from dataclasses import dataclass, field

from kuberl_operator.waits import WaitDeadlines, add_wait_arguments, waits_from_args

DEFAULT_IMAGE = "ghcr.io/kuberl/runtime-cuda:0.1.0"
LOG_FORMATS = ("plain", "full", "json")


@dataclass(frozen=True)
class OperatorConfig:
    namespaces: tuple[str, ...] = ()
    """Watched namespaces; empty means every namespace."""
    default_image: str = DEFAULT_IMAGE
    poll_interval: float = 10.0
    """Seconds between timer-driven reconciles of one job."""
    backoff_base: float = 10.0
    backoff_max: float = 600.0
    dashboard_url_override: str | None = None
    """Point every job's Ray dashboard at this URL (tests: a local Ray head)."""
    runtime_kubeconfig: str | None = None
    """Kubeconfig path handed to the runtime when it does not run in a pod (tests only)."""
    dashboard_token_file: str | None = None
    """With dashboard_url_override: the token of that one head (tests: a local Ray head)."""
    ray_token_key_file: str | None = None
    """Key every job's Ray token is derived from (the chart mounts one from its Secret)."""
    ray_token_previous_keys_file: str | None = None
    """Earlier keys (one per line), kept after a rotation for the clusters still using them."""
    stop_grace_seconds: int = 300
    """How long a stopped Ray job may take to save a checkpoint: the operator waits this long
    before deleting a suspended job's RayCluster, and the Ray pods' termination grace period."""
    operator_namespace: str | None = None
    """Where the operator's pod runs: the only namespace the heads' NetworkPolicy admits it from."""
    allow_host_path: bool = False
    """Jobs may mount hostPath volumes (spec.storage.*.hostPath)."""
    allow_secret_env: bool = False
    """Jobs may reference Secrets in env (valueFrom.secretKeyRef)."""
    allow_host_network: bool = False
    """Jobs may run their Ray pods on the node's network (spec.network: hostNetwork)."""
    dashboard_grace_seconds: float = 120.0
    """How long an unreachable dashboard is tolerated before the attempt is failed."""
    progress_deadline_floor: float = 900.0
    """Least seconds without a heartbeat before a derived progress deadline stops an attempt."""
    ray_call_timeout: float = 5.0
    """Longest a reconcile waits on one Ray Jobs API call (it runs on the gateway's threads)."""
    validation_timeout: float = 30.0
    """Longest a reconcile waits for one spec's validation; past it the spec is refused."""
    ray_cooldown_seconds: float = 30.0
    """A head whose last call was slow and failed is not called again for this long."""
    metrics_port: int = 8080
    metrics_host: str = "0.0.0.0"
    liveness_endpoint: str | None = "http://0.0.0.0:8081/healthz"
    standalone: bool = True
    max_workers: int = 8
    log_format: str = "full"
    """kopf's log formats: plain (message only), full (timestamp, logger, level) or json."""
    leader_election_id: str = "kuberl-operator"
    """The Lease operators take before acting (leader.py); `none`: act without one."""
    leader_election_namespace: str | None = None
    """Where that Lease lives; default the operator's namespace."""
    waits: WaitDeadlines = field(default_factory=WaitDeadlines)
    """The default end of every wait (waits.py)."""


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--namespace",
        action="append",
        dest="namespaces",
        default=None,
        help="namespace to watch (repeatable; env KUBERL_NAMESPACES, comma-separated)",
    )
    parser.add_argument(
        "-A", "--all-namespaces", action="store_true", help="watch every namespace (default)"
    )
    parser.add_argument("--default-image", default=_env("KUBERL_DEFAULT_IMAGE", DEFAULT_IMAGE))
    parser.add_argument(
        "--poll-interval", type=float, default=float(_env("KUBERL_POLL_INTERVAL", "10"))
    )
    parser.add_argument(
        "--backoff-base", type=float, default=float(_env("KUBERL_BACKOFF_BASE", "10"))
    )
    parser.add_argument(
        "--backoff-max", type=float, default=float(_env("KUBERL_BACKOFF_MAX", "600"))
    )
    parser.add_argument(
        "--dashboard-url-override",
        default=_env("KUBERL_DASHBOARD_URL_OVERRIDE"),
        help="use this Ray dashboard URL for every job (tests: a local Ray head)",
    )
    parser.add_argument(
        "--dashboard-token-file",
        default=_env("KUBERL_DASHBOARD_TOKEN_FILE"),
        help="file holding the token of the --dashboard-url-override head",
    )
    parser.add_argument(
        "--ray-token-key-file",
        default=_env("KUBERL_RAY_TOKEN_KEY_FILE"),
        help="key (32+ bytes) the Ray heads' tokens are derived from; the chart mounts one",
    )
    parser.add_argument(
        "--ray-token-previous-keys-file",
        default=_env("KUBERL_RAY_TOKEN_PREVIOUS_KEYS_FILE"),
        help="earlier Ray token keys, one per line, for clusters made before a rotation",
    )
    parser.add_argument(
        "--stop-grace-seconds",
        type=int,
        default=int(_env("KUBERL_STOP_GRACE_SECONDS", "300") or "300"),
        help="seconds a stopped Ray job may take to save its checkpoint: the wait before a "
        "suspended job's RayCluster is deleted, and the Ray pods' termination grace period",
    )
    parser.add_argument(
        "--operator-namespace",
        default=_env("KUBERL_OPERATOR_NAMESPACE"),
        help="the operator pod's namespace, admitted by each job's NetworkPolicy",
    )
    parser.add_argument(
        "--allow-host-path",
        action="store_true",
        default=_env("KUBERL_ALLOW_HOST_PATH", "false") == "true",
        help="let jobs mount hostPath volumes (off: KubeRay would create them for any job author)",
    )
    parser.add_argument(
        "--allow-secret-env",
        action="store_true",
        default=_env("KUBERL_ALLOW_SECRET_ENV", "false") == "true",
        help="let jobs reference Secrets of their namespace in env (valueFrom.secretKeyRef)",
    )
    parser.add_argument(
        "--allow-host-network",
        action="store_true",
        default=_env("KUBERL_ALLOW_HOST_NETWORK", "false") == "true",
        help="let jobs set spec.network: hostNetwork (off: their pods would bypass the per-job "
        "NetworkPolicy and bind node ports)",
    )
    parser.add_argument(
        "--runtime-kubeconfig",
        default=_env("KUBERL_RUNTIME_KUBECONFIG"),
        help="kubeconfig path passed to runtimes outside a pod (tests only)",
    )
    parser.add_argument(
        "--dashboard-grace-seconds",
        type=float,
        default=float(_env("KUBERL_DASHBOARD_GRACE_SECONDS", "120")),
    )
    parser.add_argument(
        "--progress-deadline-floor",
        type=float,
        default=float(_env("KUBERL_PROGRESS_DEADLINE_FLOOR", "900")),
        help="least seconds of heartbeat silence before a derived progress deadline fires",
    )
    parser.add_argument(
        "--validation-timeout",
        type=float,
        default=float(_env("KUBERL_VALIDATION_TIMEOUT", "30")),
        help="seconds one spec's validation may take; past it the job is Validated=False",
    )
    parser.add_argument("--metrics-host", default=_env("KUBERL_METRICS_HOST", "0.0.0.0"))
    parser.add_argument(
        "--metrics-port", type=int, default=int(_env("KUBERL_METRICS_PORT", "8080"))
    )
    parser.add_argument(
        "--liveness",
        default=_env("KUBERL_LIVENESS", "http://0.0.0.0:8081/healthz"),
        help="liveness endpoint URL; 'none' disables it",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default=_env("KUBERL_LOG_FORMAT", "full"),
        help="plain, full or json (env KUBERL_LOG_FORMAT)",
    )
    add_leader_arguments(parser)
    add_wait_arguments(parser)


def add_leader_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--leader-election-id",
        default=_env("KUBERL_LEADER_ELECTION_ID", "kuberl-operator"),
        help="Lease every operator of this cluster takes before acting; 'none' disables it",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=_env("KUBERL_LEADER_ELECTION_NAMESPACE"),
        help="namespace of that Lease (default: --operator-namespace, else the pod's own)",
    )


def from_args(args: argparse.Namespace) -> OperatorConfig:
    namespaces = args.namespaces or [
        n for n in (_env("KUBERL_NAMESPACES", "") or "").split(",") if n
    ]
    if args.all_namespaces:
        namespaces = []
    liveness = None if (args.liveness or "none").lower() == "none" else args.liveness
    return OperatorConfig(
        namespaces=tuple(namespaces),
        default_image=args.default_image,
        poll_interval=args.poll_interval,
        backoff_base=args.backoff_base,
        backoff_max=args.backoff_max,
        dashboard_url_override=args.dashboard_url_override,
        runtime_kubeconfig=args.runtime_kubeconfig,
        dashboard_token_file=args.dashboard_token_file,
        ray_token_key_file=args.ray_token_key_file,
        ray_token_previous_keys_file=args.ray_token_previous_keys_file,
        stop_grace_seconds=args.stop_grace_seconds,
        operator_namespace=args.operator_namespace,
        allow_host_path=args.allow_host_path,
        allow_secret_env=args.allow_secret_env,
        allow_host_network=args.allow_host_network,
        dashboard_grace_seconds=args.dashboard_grace_seconds,
        progress_deadline_floor=args.progress_deadline_floor,
        validation_timeout=args.validation_timeout,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        liveness_endpoint=liveness,
        log_format=args.log_format,
        leader_election_id=args.leader_election_id,
        leader_election_namespace=args.leader_election_namespace,
        waits=waits_from_args(args),
    )
