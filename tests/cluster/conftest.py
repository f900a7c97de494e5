"""Cluster-tier fixtures: kubectl against the session's control plane, a namespace per test."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

Kubectl = Callable[..., str]


@pytest.fixture(scope="session")
def kubectl(local_cluster: Any, cluster_binaries: Any) -> Kubectl:
    """Run the kubectl built with the server (same version), return stdout, fail on error."""
    binary = str(cluster_binaries.kubectl)

    def run(*args: str, stdin: str | None = None) -> str:
        argv = [binary, f"--kubeconfig={local_cluster.kubeconfig}", *args]
        result = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result.stdout

    return run


@pytest.fixture
def namespace(kubectl: Kubectl, kube_api: Any) -> Iterator[str]:
    """A fresh namespace whose default ServiceAccount exists (pods are refused before that)."""
    from kubernetes import client
    from testcluster.probes import wait_until

    name = f"test-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    core = client.CoreV1Api(kube_api)

    def has_default_sa() -> bool:
        return any(
            sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items
        )

    wait_until(f"ServiceAccount {name}/default", has_default_sa, None, timeout=60)
    yield name
    kubectl("delete", "namespace", name, "--wait=false")
