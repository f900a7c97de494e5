"""``trainer.logger``: console, file and TensorBoard built in (wandb, mlflow and swanlab:
test_external_trackers.py); unknown names refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kuberl_api.validation import parse_document, validate_document
from kuberl_runtime.config import load_run_config
from kuberl_runtime.tracking.tracker import build_tracker


def _tracker(tmp_path: Path, loggers: list[str]):
    return build_tracker(
        is_main=True,
        log_dir=tmp_path / "logs",
        loggers=loggers,
        total_steps=2,
        start_step=0,
        project="p",
        experiment="e",
        config={"a": 1},
        environ={},
    )


def test_console_and_tensorboard_follow_the_selection(tmp_path, capsys):
    tracker = _tracker(tmp_path / "console", ["console"])
    tracker.log({"train/loss": 1.5}, step=1)
    tracker.close()
    assert "train/loss:1.5" in capsys.readouterr().out
    assert not (tmp_path / "console" / "logs" / "tensorboard").exists()

    tracker = _tracker(tmp_path / "tb", ["tensorboard"])
    tracker.log({"train/loss": 1.5}, step=1)
    tracker.close()
    assert capsys.readouterr().out == ""
    assert list((tmp_path / "tb" / "logs" / "tensorboard").glob("events.out.tfevents.*"))


@pytest.mark.parametrize("loggers", [["console"], ["file"], ["tensorboard"]])
def test_the_jsonl_file_is_always_written(tmp_path, loggers):
    tracker = _tracker(tmp_path, loggers)
    tracker.log({"train/loss": 2.0}, step=1)
    tracker.close()
    line = json.loads((tmp_path / "logs" / "metrics.jsonl").read_text())
    assert line == {"step": 1, "train/loss": 2.0}


def _job(tmp_path: Path, loggers: list[str]) -> Path:
    path = tmp_path / "sft.yaml"
    tree = {
        "data": {"train_files": "/d/train.parquet", "train_batch_size": 8},
        "model": {"path": "/m"},
        "trainer": {"nnodes": 1, "n_gpus_per_node": 1, "logger": loggers},
    }
    path.write_text(yaml.safe_dump(tree))
    return path


def test_built_in_loggers_load(tmp_path):
    run = load_run_config(_job(tmp_path, ["console", "file", "tensorboard"]))
    assert run.plan.trainer.loggers == ["console", "file", "tensorboard"]


@pytest.mark.parametrize("name", ["neptune", "clearml"])
def test_unknown_or_unsupported_names_are_refused(name):
    tree = {
        "data": {"train_files": "/d/t.parquet"},
        "actor_rollout_ref": {"model": {"path": "/m"}},
        "trainer": {"logger": ["console", name]},
    }
    errors = validate_document(parse_document(tree)).errors
    refused = [p for p in errors if p.path == "trainer.logger"]
    assert refused and name in refused[0].render()
