"""`kuberl train` inputs: the three document shapes and dotted overrides, validated at the edge."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kuberl_api.validation import SpecInvalid
from kuberl_runtime.config import RunConfig, load_run_config

REPO = Path(__file__).resolve().parents[2]


def test_demo_config_loads_with_overrides():
    run = load_run_config(
        REPO / "examples" / "demo.yaml",
        [
            "trainer.total_training_steps=3",
            "actor_rollout_ref.rollout.temperature=0.5",
            "+trainer.seed=7",
        ],
    )
    cfg = run.backend_config
    assert cfg.trainer.total_training_steps == 3
    assert cfg.actor_rollout_ref.rollout.temperature == 0.5
    assert cfg.trainer.seed == 7
    assert run.output_dir == run.checkpoint_dir == (Path.cwd() / ".demo" / "outputs")


def test_overrides_reach_the_backend_config_of_a_manifest():
    run = load_run_config(REPO / "examples" / "grpo-gsm8k.yaml", ["data.train_batch_size=512"])
    assert run.backend_config.data.train_batch_size == 512
    assert run.af_output_dir == "/mnt/af/grpo-gsm8k"
    assert run.output_dir == Path("/mnt/af/grpo-gsm8k")


def test_a_bad_override_names_the_path(tmp_path):
    with pytest.raises(SpecInvalid) as err:
        load_run_config(REPO / "examples" / "demo.yaml", ["trainer.total_epoch=3"])
    assert "total_epoch" in str(err.value.problems[0].render())
    with pytest.raises(SpecInvalid):
        load_run_config(REPO / "examples" / "demo.yaml", ["trainer.save_freq"])


def test_run_config_round_trips_through_json():
    run = load_run_config(REPO / "examples" / "modelarts-verl.yaml")
    again = RunConfig.from_json(run.to_json())
    assert again.backend_config == run.backend_config
    assert again.af_output_dir == run.af_output_dir
    assert yaml.safe_dump(again.backend_config.model_dump(mode="json"))


def test_config_from_stdin(monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO((REPO / "examples" / "demo.yaml").read_text()))
    run = load_run_config("-", ["trainer.total_training_steps=2"])
    assert run.backend_config.trainer.total_training_steps == 2
