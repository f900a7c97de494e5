"""Real-pod tier: a real kubelet (containerd + runc) beside the kwok pools, images from images/.

`real_node` starts it in the session cluster's directory (hack/realnode), building the images
first when the cache has none (hack/realimages.sh). A machine that cannot run it (not root, no
overlayfs, no cgroups, packages missing) skips the tier with the reason, except under CI=true,
where the same reason fails the run: CI runs on machines that can.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import localcluster
import pytest
import realnode

from realpods.pods import require_real_node_support

Kubectl = Callable[..., str]


@pytest.fixture(scope="session")
def real_node(local_cluster: Any) -> Iterator[Any]:
    require_real_node_support()
    started_here = realnode.load_real_node(Path(local_cluster.dir)) is None
    node = localcluster.start_real_node(local_cluster)
    yield node
    if started_here and not os.environ.get("KUBERL_CLUSTER_DIR"):
        left = realnode.stop_real_node(Path(local_cluster.dir))
        assert not left, f"the real node left behind: {left}"


@pytest.fixture(scope="session")
def kubectl(local_cluster: Any, cluster_binaries: Any) -> Kubectl:
    binary = str(cluster_binaries.kubectl)

    def run(*args: str, stdin: str | None = None, check: bool = True) -> str:
        argv = [binary, f"--kubeconfig={local_cluster.kubeconfig}", *args]
        result = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120)
        if check:
            assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result.stdout + result.stderr * (not check)

    return run


@pytest.fixture
def namespace(kubectl: Kubectl) -> Iterator[str]:
    from support.rljobs import wait_for

    name = f"real-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    wait_for(
        f"ServiceAccount {name}/default",
        lambda: "default" in kubectl("get", "serviceaccounts", "-n", name, "-o", "name"),
    )
    yield name
    kubectl("delete", "namespace", name, "--wait=false")
