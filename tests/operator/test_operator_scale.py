"""bench/operator_scale.py with a small N: every job ends Provisioning and Validated with exactly
one RayCluster, and KubeRay gives each of those RayClusters its head Service (no update lost).
Its timings are printed, never asserted."""

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "operator_scale.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("operator_scale", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_jobs_and_kuberays_clusters_keep_every_status(
    kube_api, local_cluster, job_namespace, operator_process
):
    bench = load_bench()
    operator = bench.Process(operator_process.process.pid)
    kuberay = bench.Process(local_cluster.pids()["ray-operator"])
    kuberl, theirs = bench.run(kube_api, job_namespace, 10, operator, kuberay, timeout=180)
    assert len(kuberl.latencies) == len(theirs.latencies) == 10
    assert len(kuberl.extra["apply->Validated"]) == len(theirs.extra["RayCluster->status"]) == 10
    assert kuberl.peak_rss_mib > 0 and theirs.peak_rss_mib > 0 and kuberl.cpu_seconds > 0
    print(bench.report(kuberl, theirs, 10))
