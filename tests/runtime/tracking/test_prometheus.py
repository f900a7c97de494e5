"""Rank 0's /metrics: verl metric keys become Prometheus gauges the chart's dashboard can query."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kuberl_runtime.tracking.prometheus import PrometheusTracker, metric_name
from kuberl_runtime.tracking.tracker import build_tracker

REPO = Path(__file__).resolve().parents[3]


def scrape(port: int) -> dict[str, dict[tuple, float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


@pytest.mark.parametrize(
    ("key", "name"),
    [
        ("critic/score/mean", "kuberl_runtime_critic_score_mean"),
        ("perf/throughput", "kuberl_runtime_perf_throughput"),
        ("timing_s/gen", "kuberl_runtime_timing_s_gen"),
        ("val-core/arith/acc/mean@4", "kuberl_runtime_val_core_arith_acc_mean_at_4"),
        ("actor/pg_clipfrac_lower", "kuberl_runtime_actor_pg_clipfrac_lower"),
        ("Weird  Key//x", "kuberl_runtime_weird_key_x"),
    ],
)
def test_metric_names_are_sanitised_verl_keys(key: str, name: str) -> None:
    assert metric_name(key) == name
    assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name)


def test_served_gauges_follow_each_step() -> None:
    tracker = PrometheusTracker(0, job="demo-job", addr="127.0.0.1")
    try:
        tracker.log({"critic/score/mean": 0.25, "training/epoch": 1.0}, step=3)
        tracker.log({"critic/score/mean": 0.75}, step=4)
        tracker.on_checkpoint(4)
        samples = scrape(tracker.port)
    finally:
        tracker.close()
    job = (("kuberl_job", "demo-job"),)
    assert samples["kuberl_runtime_critic_score_mean"][job] == 0.75
    assert samples["kuberl_runtime_global_step"][job] == 4
    assert samples["kuberl_runtime_training_epoch"][job] == 1.0
    assert samples["kuberl_runtime_last_checkpoint_step"][job] == 4


def test_server_starts_only_when_the_operator_asks(tmp_path: Path) -> None:
    common = dict(
        is_main=True,
        log_dir=tmp_path,
        loggers=["console"],
        total_steps=2,
        start_step=0,
        project="p",
        experiment="e",
        config={},
    )
    local = build_tracker(**common, environ={})
    assert not any(isinstance(b, PrometheusTracker) for b in local.backends)
    local.close()
    served = build_tracker(
        **common, environ={"KUBERL_METRICS_PORT": "0", "KUBERL_METRICS_ADDR": "127.0.0.1"}
    )
    try:
        (server,) = [b for b in served.backends if isinstance(b, PrometheusTracker)]
        served.log({"perf/throughput": 123.0}, step=1)
        assert scrape(server.port)["kuberl_runtime_perf_throughput"][(("kuberl_job", "e"),)] == 123
    finally:
        served.close()
