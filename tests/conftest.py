"""Fixtures shared by every test tier.

`local_cluster` starts one real control plane per session (hack/localcluster.py): etcd,
kube-apiserver, controller-manager, scheduler, kwok fake node pools and the KubeRay operator. Set
KUBERL_CLUSTER_DIR to the state directory of a cluster from `make cluster-up` to reuse it (it is
left running). When a test that used the cluster fails, its report carries the components' log
tails.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

HACK_DIR = Path(__file__).resolve().parent.parent / "hack"
_CLUSTER_DIR_KEY = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    # Cluster-tier tests import the tooling's pure parts (node pools, probes) like a library.
    if str(HACK_DIR) not in sys.path:
        sys.path.insert(0, str(HACK_DIR))


CONTROL_PLANE_TIERS = ("cluster", "e2e", "realpods")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # make test runs the control-plane tiers in a lane of their own (hack/pytest-lanes.sh): a test
    # that starts the local cluster belongs there whether or not its module says so.
    for item in items:
        uses_cluster = "local_cluster" in getattr(item, "fixturenames", ())
        if uses_cluster and not any(item.get_closest_marker(t) for t in CONTROL_PLANE_TIERS):
            item.add_marker(pytest.mark.cluster)


RANK_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(autouse=True)
def _rank_env_stays_in_its_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank's env vars set by a test (init_distributed publishes MASTER_PORT) end with it, so no
    later test's subprocess inherits another run's rendezvous port."""
    for key in RANK_ENV:
        monkeypatch.delenv(key, raising=False)


@functools.cache
def localcluster() -> ModuleType:
    """hack/localcluster.py, imported by path (hack/ is tooling, not an installed package)."""
    spec = importlib.util.spec_from_file_location("localcluster", HACK_DIR / "localcluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["localcluster"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def cluster_binaries() -> Any:
    """Paths of the built control-plane binaries (kubectl, helm, ...); fails if any is missing."""
    lc = localcluster()
    try:
        return lc.require_binaries()
    except lc.BinariesMissingError as error:
        # Never skip: a missing toolchain must turn the suite red, not quietly green.
        pytest.fail(str(error), pytrace=False)


@pytest.fixture(scope="session")
def local_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, cluster_binaries: Any
) -> Iterator[Any]:
    """The running cluster's ClusterState (kubeconfig, server, ports, pids, log_dir)."""
    lc = localcluster()
    if reuse := os.environ.get("KUBERL_CLUSTER_DIR"):
        state = lc.load_state(Path(reuse))
        if state is None or not state.ready:
            pytest.fail(f"KUBERL_CLUSTER_DIR={reuse} holds no ready cluster; run `make cluster-up`")
        request.config.stash[_CLUSTER_DIR_KEY] = Path(reuse)
        yield state
        return
    state_dir = tmp_path_factory.mktemp("cluster")
    request.config.stash[_CLUSTER_DIR_KEY] = state_dir
    state = lc.up(state_dir)
    try:
        yield state
    finally:
        lc.down(state_dir)


@pytest.fixture(scope="session")
def kube_api(local_cluster: Any) -> Any:
    """A `kubernetes.client.ApiClient` authenticated as the cluster admin."""
    from kubernetes import config  # the cluster tiers' dependency, not the unit tests'

    return config.new_client_from_config(config_file=local_cluster.kubeconfig)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    state_dir = item.config.stash.get(_CLUSTER_DIR_KEY, None)
    uses_cluster = "local_cluster" in getattr(item, "fixturenames", ())
    if report.failed and uses_cluster and state_dir is not None:
        report.sections.append(("control plane logs", localcluster().log_tails(state_dir)))
    return report
