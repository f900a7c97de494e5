"""bench/operator_scale.py with a small N: every job and RayJob ends with the right status and
exactly one RayCluster (no update lost). Its timings are printed, never asserted."""

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


def test_load_of_jobs_and_rayjobs_keeps_every_status(
    kube_api, local_cluster, job_namespace, operator_process
):
    bench = load_bench()
    pid = operator_process.process.pid
    kuberl, kuberay = bench.run(kube_api, job_namespace, 10, pid,
                                local_cluster.pids().get("ray-operator"), timeout=120)  # fmt: skip
    assert len(kuberl.latencies) == len(kuberay.latencies) == 10
    assert kuberl.peak_rss_mib > 0 and kuberay.peak_rss_mib > 0
    print(bench.report(kuberl, kuberay))
