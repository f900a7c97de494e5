"""Ray launcher: one Ray actor per accelerator across the RayCluster, each running one SPMD rank.

A placement group holds `trainer.nnodes` bundles of `trainer.n_gpus_per_node` accelerators,
STRICT_SPREAD over nodes (one bundle per node) and packed within each; one actor per rank takes
one accelerator from its node's bundle. The driver then learns where every actor landed, gives
each rank its env (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT of rank 0's node, the node's
visible devices) and runs the same worker as the local launcher (`run_worker`). When any rank
fails the others are killed and the attempt fails with the rank, node and cause. SIGTERM to the
driver (`ray job stop`) creates the run's stop file: the ranks save a checkpoint after the step
in flight and stop (trainer/preemption.py); the driver then exits 143.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kuberl_runtime.config import RunConfig
from kuberl_runtime.device import ACCELERATOR_ENV_PREFIXES, Device, requested_device
from kuberl_runtime.launcher.local import LaunchError
from kuberl_runtime.trainer.preemption import EXIT_CODE as PREEMPTED_EXIT_CODE
from kuberl_runtime.trainer.preemption import STOP_FILE_ENV, Preempted, new_stop_file

logger = logging.getLogger(__name__)

PLACEMENT_TIMEOUT_ENV = "KUBERL_RAY_PLACEMENT_TIMEOUT_S"
DEFAULT_PLACEMENT_TIMEOUT_S = 600.0
# Driver env vars the ranks need to behave like local ranks (faults, reporting, caches, comms).
FORWARDED_ENV_PREFIXES = (
    "KUBERL_",
    "HF_",
    "TRANSFORMERS_",
    "TORCH_",
    "WANDB_",
    "MLFLOW_",
    "SWANLAB_",
    *ACCELERATOR_ENV_PREFIXES,
)
FORWARDED_ENV_NAMES = ("OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM")
# Settings of the driver's own pod, never forwarded: each rank keeps its pod's value. With
# hostNetwork every pod group has its own metrics port (and node IP); the head's would make a rank
# on a worker bind a port its pod never declared.
POD_OWN_ENV_NAMES = ("KUBERL_METRICS_PORT", "KUBERL_NODE_IP")
# Credentials (HF_TOKEN, WANDB_API_KEY, ...) never travel in a runtime_env: Ray's runtime-env agent
# logs every runtime_env it creates, env_vars included, on each node, and its state API shows
# them. A rank has them anyway: spec.env reaches every pod's container, and a local Ray's raylet
# inherits the driver's environment.
CREDENTIAL_NAME_PARTS = frozenset(
    {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "KEY", "APIKEY"}
)


class RankFailed(RuntimeError):
    """A rank died or raised; the whole attempt is over (the operator resumes it)."""


@dataclass(frozen=True)
class RankPlacement:
    """Where Ray put one rank's actor."""

    rank: int
    node_id: str
    node_ip: str
    accelerator_ids: tuple[str, ...]


def placement_strategy(nnodes: int, device: Device) -> str:
    """STRICT_SPREAD puts each node's bundle on its own machine. CPU runs (tests, demos) may
    share one machine, so there the spread is best effort."""
    if nnodes == 1:
        return "PACK"
    return "SPREAD" if device.type == "cpu" else "STRICT_SPREAD"


def build_rank_envs(
    placements: Sequence[RankPlacement], device: Device, master_addr: str, master_port: int
) -> list[dict[str, str]]:
    """Per-rank env: ranks on one node see all of the node's accelerators, LOCAL_RANK picks one.

    Ranks are grouped by Ray node id (not IP: two CPU "nodes" may share a host in tests).
    """
    by_node: dict[str, list[RankPlacement]] = {}
    for placement in sorted(placements, key=lambda p: p.rank):
        by_node.setdefault(placement.node_id, []).append(placement)
    envs: dict[int, dict[str, str]] = {}
    for node_ranks in by_node.values():
        visible = sorted({i for p in node_ranks for i in p.accelerator_ids}, key=_device_order)
        for position, placement in enumerate(node_ranks):
            local_rank = (
                visible.index(placement.accelerator_ids[0])
                if placement.accelerator_ids
                else position
            )
            env = {
                "RANK": str(placement.rank),
                "WORLD_SIZE": str(len(placements)),
                "LOCAL_RANK": str(local_rank),
                "LOCAL_WORLD_SIZE": str(len(node_ranks)),
                "MASTER_ADDR": master_addr,
                "MASTER_PORT": str(master_port),
            }
            if device.visible_devices_env and visible:
                env[device.visible_devices_env] = ",".join(visible)
            envs[placement.rank] = env
    return [envs[rank] for rank in sorted(envs)]


def forwarded_env(environ: Mapping[str, str], device: Device) -> dict[str, str]:
    """The driver's settings every rank should see (Ray workers inherit the raylet's env)."""
    env = {
        key: value
        for key, value in environ.items()
        if (key.startswith(FORWARDED_ENV_PREFIXES) or key in FORWARDED_ENV_NAMES)
        and key not in POD_OWN_ENV_NAMES
        and not names_a_credential(key)
    }
    if device.alloc_conf_env and device.alloc_conf_env in environ:
        env[device.alloc_conf_env] = environ[device.alloc_conf_env]
    if device.ray_noset_visible_devices_env:
        env[device.ray_noset_visible_devices_env] = "1"
    return env


def names_a_credential(name: str) -> bool:
    """``HF_TOKEN``, ``WANDB_API_KEY``, ``MLFLOW_TRACKING_PASSWORD``: a word of the name says so
    (``TOKENIZERS_PARALLELISM`` does not)."""
    return not CREDENTIAL_NAME_PARTS.isdisjoint(name.upper().split("_"))


def describe_failure(placement: RankPlacement, error: BaseException) -> str:
    """One line for the attempt's failure: which rank, where, and why."""
    cause = getattr(error, "cause", None)  # RayTaskError wraps the rank's own exception
    culprit = cause if isinstance(cause, BaseException) else error
    detail = " ".join(str(culprit).split())
    if len(detail) > 600:
        detail = detail[:600] + " ..."
    return (
        f"rank {placement.rank} on node {placement.node_ip} ({placement.node_id[:12]}) failed: "
        f"{type(culprit).__name__}: {detail or 'no message'}"
    )


class RankProcess:
    """The body of one rank's Ray actor (wrapped by `ray.remote` at launch time)."""

    def __init__(self, accelerator_key: str) -> None:
        self.accelerator_key = accelerator_key

    def placement(self, rank: int) -> RankPlacement:
        import ray

        context = ray.get_runtime_context()
        ids = context.get_accelerator_ids().get(self.accelerator_key, [])
        return RankPlacement(
            rank=rank,
            node_id=context.get_node_id(),
            node_ip=ray.util.get_node_ip_address(),
            accelerator_ids=tuple(str(i) for i in ids),
        )

    def free_port(self) -> int:
        with socket.socket() as sock:
            sock.bind(("", 0))
            return sock.getsockname()[1]

    def run(self, env: dict[str, str], run_json: str) -> None:
        from kuberl_runtime.launcher.worker import run_worker

        os.environ.update(env)
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        run_worker(RunConfig.from_json(run_json))


def launch_ray(run: RunConfig) -> int:
    """Run the job on the Ray cluster at RAY_ADDRESS (or a local one); returns the exit code."""
    import ray

    placement = run.plan.placement
    nnodes, per_node = placement.nnodes, placement.n_gpus_per_node
    device = requested_device(placement.device)
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), log_to_driver=True)
    stop = new_stop_file(run.plan.paths.output_dir)
    os.environ[STOP_FILE_ENV] = str(stop)  # forwarded to every rank (KUBERL_*)
    signal.signal(signal.SIGTERM, lambda signum, _frame: _request_stop(stop, signum))
    group = _reserve(device, nnodes, per_node)
    actors = _start_actors(group, device, nnodes, per_node)
    try:
        placements = ray.get([actor.placement.remote(rank) for rank, actor in enumerate(actors)])
        port = ray.get(actors[0].free_port.remote())
        envs = build_rank_envs(placements, device, placements[0].node_ip, port)
        logger.info(
            "ray launcher: %d ranks on %d node(s), master %s:%d",
            len(actors),
            len({p.node_id for p in placements}),
            placements[0].node_ip,
            port,
        )
        run_json = run.to_json()
        runs = {
            actor.run.remote(env, run_json): placement
            for actor, env, placement in zip(actors, envs, placements, strict=True)
        }
        _wait_all(runs)
        return 0
    except RankFailed as err:
        if isinstance(_rank_cause(err.__cause__), Preempted):
            logger.warning("%s; exiting %d", _rank_cause(err.__cause__), PREEMPTED_EXIT_CODE)
            return PREEMPTED_EXIT_CODE
        logger.error("%s; the other ranks were stopped", err)
        return 2 if _config_error(err.__cause__) else 1
    finally:
        for actor in actors:
            ray.kill(actor)
        ray.util.remove_placement_group(group)
        stop.unlink(missing_ok=True)


def _request_stop(stop: Path, signum: int) -> None:
    """The driver's SIGTERM: tell every rank, through the shared output directory."""
    logger.warning("signal %d: asking the ranks to checkpoint and stop (%s)", signum, stop)
    stop.parent.mkdir(parents=True, exist_ok=True)
    stop.touch()


def _reserve(device: Device, nnodes: int, per_node: int) -> Any:
    import ray
    from ray.util.placement_group import placement_group

    bundles = [device.ray_bundle(per_node) for _ in range(nnodes)]
    group = placement_group(bundles, strategy=placement_strategy(nnodes, device))
    timeout = float(os.environ.get(PLACEMENT_TIMEOUT_ENV, DEFAULT_PLACEMENT_TIMEOUT_S))
    ready, _ = ray.wait([group.ready()], timeout=timeout)
    if not ready:
        ray.util.remove_placement_group(group)
        raise LaunchError(
            f"Ray could not place {nnodes} node(s) x {per_node} {device.ray_resource} within "
            f"{timeout:.0f}s (cluster has {ray.cluster_resources()}); check the worker pools "
            f"against trainer.nnodes / trainer.n_gpus_per_node, or raise {PLACEMENT_TIMEOUT_ENV}"
        )
    return group


def _start_actors(group: Any, device: Device, nnodes: int, per_node: int) -> list[Any]:
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    accelerator_key = "" if device.type == "cpu" else device.ray_resource
    actor_cls = ray.remote(max_restarts=0)(RankProcess)
    runtime_env = {"env_vars": forwarded_env(os.environ, device)}
    actors = []
    for node in range(nnodes):
        strategy = PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=node
        )
        for _ in range(per_node):
            options = {
                **device.ray_actor_options(),
                "scheduling_strategy": strategy,
                "runtime_env": runtime_env,
            }
            actors.append(actor_cls.options(**options).remote(accelerator_key))
    return actors


def _wait_all(runs: dict[Any, RankPlacement]) -> None:
    import ray

    pending = list(runs)
    while pending:
        # With a timeout, so the driver's SIGTERM handler runs within a second.
        done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
        for ref in done:
            try:
                ray.get(ref)
            except Exception as err:  # a dead actor or the rank's own exception
                raise RankFailed(describe_failure(runs[ref], err)) from err


def _config_error(error: BaseException | None) -> bool:
    """Rank 0's memory check refused the job: a configuration error (exit 2), not a crash."""
    from kuberl_runtime.checkpoint.owner import OutputDirOwned
    from kuberl_runtime.dryrun.from_plan import JobDoesNotFit

    return isinstance(_rank_cause(error), JobDoesNotFit | OutputDirOwned)


def _rank_cause(error: BaseException | None) -> BaseException | None:
    """The rank's own exception (RayTaskError wraps it)."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


def _device_order(device_id: str) -> tuple[int, str]:
    return (int(device_id), "") if device_id.isdigit() else (1 << 30, device_id)
