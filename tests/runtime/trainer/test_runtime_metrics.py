"""A real CPU run serves /metrics on rank 0 and draws logs/curves.png at every checkpoint.

The dashboard the chart installs queries runtime series by name; this test scrapes a live run and
checks that every one of those names is really exported.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from freeport import free_port
from prometheus_client.parser import text_string_to_metric_families

from tests.runtime.trainer.conftest import base_config

pytestmark = pytest.mark.runtime
REPO = Path(__file__).resolve().parents[3]


def scrape(port: int) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return {}
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def dashboard_runtime_metrics() -> set[str]:
    dashboard = json.loads((REPO / "charts/kuberl/files/dashboard.json").read_text())
    names = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = re.sub(r"\{[^}]*\}|\b(by|without)\s*\([^)]*\)", "", target["expr"])
            names.update(re.findall(r"\b(kuberl_runtime_[a-z0-9_]+)\b", expr))
    return names


def test_live_run_serves_the_dashboards_metrics_and_draws_curves(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    # Long enough that the run is still going when it has been scraped; stopped once it has.
    config = base_config(tiny_model_dir, out / "checkpoints", total_training_steps=50, save_freq=1)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"backend_config": config, "af_output_dir": str(out)}))
    port = free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "KUBERL_METRICS_PORT": str(port),
        "KUBERL_METRICS_ADDR": "127.0.0.1",
        "KUBERL_JOB_NAME": "metrics-test",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "kuberl_cli.main", "train", str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    curves = out / "logs" / "curves.png"
    samples: dict[str, float] = {}
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            samples = scrape(port)
            if samples.get("kuberl_runtime_global_step", 0) >= 2 and curves.exists():
                break
            time.sleep(0.5)
        running = proc.poll() is None
    finally:
        proc.kill()
        output = proc.communicate()[0]
    assert running, f"the run ended before it could be scraped:\n{output[-3000:]}"
    missing = dashboard_runtime_metrics() - samples.keys()
    assert not missing, f"the dashboard queries series the runtime does not export: {missing}"
    assert samples["kuberl_runtime_last_checkpoint_step"] >= 1
    assert curves.read_bytes().startswith(b"\x89PNG")
