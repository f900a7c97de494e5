"""``kuberl validate`` and ``kuberl crd`` as a user runs them."""

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).parents[2]


def kuberl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kuberl_cli", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_validate_examples_passes():
    done = kuberl("validate", *sorted(str(p) for p in (ROOT / "examples").glob("*.yaml")))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(": ok (") >= 4


def test_validate_prints_every_problem_and_fails(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "data": {"trian_files": "x"},
                "actor_rollout_ref": {"model": {"path": "/m"}},
                "algorithm": {"adv_estimator": "ppo"},
            }
        )
    )
    done = kuberl("validate", str(bad))
    assert done.returncode == 1
    assert "data.trian_files: unknown key — did you mean data.train_files?" in done.stderr
    assert "data.train_files: required key is missing" in done.stderr
    assert "algorithm.adv_estimator: must be one of gae, grpo" in done.stderr


def test_validate_reports_malformed_yaml_with_its_line(tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("data:\n  train_files: [a, b\n")
    done = kuberl("validate", str(bad))
    assert done.returncode == 1
    assert f"{bad}:3:" in done.stderr and "malformed YAML" in done.stderr


def test_validate_missing_file_fails():
    done = kuberl("validate", "does/not/exist.yaml")
    assert done.returncode == 1 and "no such file" in done.stderr


def test_crd_command_prints_the_committed_crd():
    done = kuberl("crd")
    assert done.returncode == 0
    assert done.stdout == (ROOT / "crds" / "rltrainingjobs.kuberl.io.yaml").read_text()
