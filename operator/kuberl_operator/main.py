"""Run the operator: ``kuberl operator`` and ``python -m kuberl_operator``."""

import argparse
import asyncio
import logging

import kopf
from kubernetes import client
from kubernetes import config as kube_config

from kuberl_operator.bounds import allow_api_server_depth
from kuberl_operator.cached_kube import CachedKube
from kuberl_operator.config import OperatorConfig, add_arguments, from_args
from kuberl_operator.handlers import build_settings, post_event, register
from kuberl_operator.kuberay_check import kuberay_problem
from kuberl_operator.leader import (
    DISABLED,
    LeaderLease,
    LeaseSettings,
    exit_now,
    lease_namespace,
    new_identity,
    standby_health,
)
from kuberl_operator.metrics import Metrics
from kuberl_operator.reconcile import Reconciler

log = logging.getLogger(__name__)


def api_client() -> client.ApiClient:
    try:
        kube_config.load_incluster_config()
    except kube_config.ConfigException:
        kube_config.load_kube_config()
    return client.ApiClient()


def configure_logging(log_format: str) -> None:
    """kopf's formatter on the root logger, replacing any handler set up before (the CLI's)."""
    root = logging.getLogger()
    verbose = root.level == logging.DEBUG
    root.handlers.clear()
    kopf.configure(verbose=verbose, log_format=kopf.LogFormat[log_format.upper()])


def run_operator(config: OperatorConfig) -> None:
    configure_logging(config.log_format)
    allow_api_server_depth()  # one deeply nested job must not stop the watch for every job
    if problem := kuberay_problem(api_client()):
        log.error("refusing to start: %s", problem)
        raise SystemExit(1)
    metrics = Metrics()
    metrics.serve(config.metrics_host, config.metrics_port)
    kube = CachedKube(api_client(), config.namespaces)
    if unsynced := kube.start():  # a standby keeps them warm too: a hand-over starts at once
        log.warning("not listed yet: %s; their reads go to the API server until they are",
                    ", ".join(unsynced))  # fmt: skip
    reconciler = Reconciler(kube, config, metrics, emit=post_event, jobs=kube.jobs)
    registry = kopf.OperatorRegistry()
    register(registry, reconciler, config)
    where = ", ".join(config.namespaces) or "all namespaces"
    log.info(
        "kuberl operator watching %s; metrics on %s:%d",
        where,
        config.metrics_host,
        config.metrics_port,
    )
    asyncio.run(_lead_then_operate(config, registry, leader_lease(config)))


def leader_lease(config: OperatorConfig) -> LeaderLease | None:
    if config.leader_election_id.lower() == DISABLED:
        log.warning("leader election is off: nothing stops a second operator acting too")
        return None
    namespace = lease_namespace(config.leader_election_namespace, config.operator_namespace)
    settings = LeaseSettings(namespace, config.leader_election_id, new_identity())
    return LeaderLease(api_client(), settings)


async def _lead_then_operate(
    config: OperatorConfig, registry: kopf.OperatorRegistry, lease: LeaderLease | None
) -> None:
    """kopf starts only once this process holds the Lease (leader.py), and the process exits
    the moment it stops holding it."""
    keeper = None
    if lease is not None:
        async with standby_health(config.liveness_endpoint):
            await lease.acquire()
        keeper = asyncio.create_task(lease.keep(on_lost=exit_now))
    try:
        await kopf.operator(
            registry=registry,
            settings=build_settings(config),
            standalone=config.standalone,
            clusterwide=not config.namespaces,
            namespaces=config.namespaces,
            liveness_endpoint=config.liveness_endpoint,
        )
    finally:
        if lease is not None and keeper is not None:
            keeper.cancel()
            await lease.release_quietly()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kuberl-operator", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    run_operator(from_args(args))
    return 0
