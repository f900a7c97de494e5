"""Multi-turn metrics reach Prometheus: the rollout's turn and per-tool metrics, as the trainer
logs them, are served as gauges a dashboard can query."""

from __future__ import annotations

from kuberl_runtime.rollout.multi_turn_batch import rollout_metrics
from kuberl_runtime.tracking.prometheus import PrometheusTracker
from tests.runtime.tracking.test_prometheus import scrape

ROWS = [
    {
        "num_turns": 5,
        "assistant_turns": 3,
        "hit_turn_limit": True,
        "calls": [("calculator", False, 0.01), ("code_interpreter", True, 0.5)],
    },
    {"num_turns": 1, "assistant_turns": 1, "hit_turn_limit": False, "calls": []},
]


def test_turn_and_tool_metrics_are_served() -> None:
    tracker = PrometheusTracker(0, job="tools-job", addr="127.0.0.1")
    try:
        tracker.log(rollout_metrics(ROWS, mismatched=0), step=2)
        samples = scrape(tracker.port)
    finally:
        tracker.close()
    job = (("kuberl_job", "tools-job"),)
    expected = {
        "kuberl_runtime_num_turns_max": 5.0,
        "kuberl_runtime_num_turns_mean": 3.0,
        "kuberl_runtime_multi_turn_assistant_turns_mean": 2.0,
        "kuberl_runtime_multi_turn_turn_limit_ratio": 0.5,
        "kuberl_runtime_multi_turn_tokenization_mismatches": 0.0,
        "kuberl_runtime_tool_calculator_calls": 1.0,
        "kuberl_runtime_tool_calculator_failures": 0.0,
        "kuberl_runtime_tool_code_interpreter_calls": 1.0,
        "kuberl_runtime_tool_code_interpreter_failures": 1.0,
        "kuberl_runtime_timing_s_tool_code_interpreter_max": 0.5,
    }
    assert {name: samples[name][job] for name in expected} == expected
