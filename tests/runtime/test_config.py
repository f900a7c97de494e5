"""`kuberl train` inputs: the three document shapes and dotted overrides, validated at the edge
and turned into the run plan the runtime reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from kuberl_api.validation import SpecInvalid
from kuberl_runtime.config import RunConfig, load_run_config, run_config_from_dict

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
    plan = run.plan
    assert plan.trainer.total_training_steps == 3
    assert plan.rollout.temperature == 0.5
    assert plan.trainer.seed == 7
    assert run.output_dir == run.checkpoint_dir == (Path.cwd() / ".demo" / "outputs")


def test_overrides_reach_the_plan_of_a_manifest():
    run = load_run_config(REPO / "examples" / "grpo-gsm8k.yaml", ["data.train_batch_size=512"])
    assert run.plan.data.train_batch_size == 512
    assert run.output_dir == Path("/mnt/af/grpo-gsm8k")
    assert run.plan.paths.logs_dir == "/mnt/af/grpo-gsm8k/logs"


def test_a_bad_override_names_the_path(tmp_path):
    with pytest.raises(SpecInvalid) as err:
        load_run_config(REPO / "examples" / "demo.yaml", ["trainer.total_epoch=3"])
    assert "total_epoch" in str(err.value.problems[0].render())
    with pytest.raises(SpecInvalid):
        load_run_config(REPO / "examples" / "demo.yaml", ["trainer.save_freq"])


def test_a_refused_key_stops_the_run_at_the_edge():
    with pytest.raises(SpecInvalid) as err:
        load_run_config(
            REPO / "examples" / "demo.yaml",
            ["actor_rollout_ref.model.use_liger=true"],
        )
    assert "not supported by kuberl" in str(err.value)


def test_run_config_round_trips_through_json():
    run = load_run_config(REPO / "examples" / "modelarts-verl.yaml")
    again = RunConfig.from_json(run.to_json())
    assert again.plan == run.plan
    assert again.output_dir == run.output_dir


def test_config_from_stdin(monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO((REPO / "examples" / "demo.yaml").read_text()))
    run = load_run_config("-", ["trainer.total_training_steps=2"])
    assert run.plan.trainer.total_training_steps == 2


def test_a_backend_config_dict_is_validated_and_planned():
    import yaml

    tree = yaml.safe_load((REPO / "examples" / "demo.yaml").read_text())
    assert run_config_from_dict(tree).plan.placement.world_size == 2
    tree["data"]["validation_shuffle"] = True  # a refused key
    with pytest.raises(SpecInvalid):
        run_config_from_dict(tree)
