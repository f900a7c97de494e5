"""A ROLL config is told by its shape, validates as a file, in a manifest and through the CLI."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kuberl_api.validation import DocumentKind, load_documents, parse_document, validate_document
from support.roll import validate

ROOT = Path(__file__).parents[3]
EXAMPLE = ROOT / "examples" / "roll-rlvr.yaml"


@pytest.mark.parametrize("marker", ["actor_train", "actor_infer"])
def test_detected_by_its_workers(base, marker):
    raw = {marker: base[marker], "critic": {}, "rollout_batch_size": 8}
    assert parse_document(raw).kind is DocumentKind.ROLL


def test_a_verl_tree_with_a_critic_is_not_roll():
    raw = {"data": {}, "actor_rollout_ref": {}, "critic": {}}
    assert parse_document(raw).kind is DocumentKind.BACKEND_CONFIG


def test_example_validates_without_problems():
    (doc,) = load_documents(EXAMPLE)
    result = validate_document(doc)
    assert doc.kind is DocumentKind.ROLL
    assert result.problems == [], [p.render() for p in result.problems]
    cfg = result.backend_config
    assert (cfg.data.train_batch_size, cfg.actor_rollout_ref.rollout.n) == (8, 4)
    assert cfg.data.train_files == "examples/data/arith/train.jsonl"
    assert cfg.data.prompt_key == "messages"
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (1, 2)
    assert cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 4


def test_example_data_files_exist():
    for name in ("train.jsonl", "test.jsonl"):
        assert (ROOT / "examples" / "data" / "arith" / name).is_file()


def test_cli_validate_passes_on_the_example():
    done = subprocess.run(
        [sys.executable, "-m", "kuberl_cli", "validate", str(EXAMPLE)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert ": ok (roll) — grpo, 1x2" in done.stdout


def _cli_validate(tmp_path, raw: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "roll.yaml"
    path.write_text(yaml.safe_dump(raw))
    return subprocess.run(
        [sys.executable, "-m", "kuberl_cli", "validate", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_cli_prints_warnings_with_roll_paths_and_passes(tmp_path, base):
    base["actor_infer"]["strategy_args"]["strategy_name"] = "sglang"
    done = _cli_validate(tmp_path, base)
    assert done.returncode == 0, done.stderr
    assert "warning: actor_infer.strategy_args.strategy_name: SGLang generation" in done.stderr


def test_cli_prints_errors_with_roll_paths_and_fails(tmp_path, base):
    base["whiten_rewards"] = True
    done = _cli_validate(tmp_path, base)
    assert done.returncode == 1
    assert "error: whiten_rewards: ROLL's whiten_rewards is not supported by kuberl" in done.stderr


def _manifest(roll: dict, **spec) -> dict:
    return {
        "apiVersion": "kuberl.io/v1alpha1",
        "kind": "RLTrainingJob",
        "metadata": {"name": "roll"},
        "spec": {
            "af_output_dir": "/out/roll",
            "workerPools": [
                {"name": "gpu", "nodes": 1, "accelerator": {"type": "nvidia.com/gpu", "perNode": 2}}
            ],
            "roll_config": roll,
            **spec,
        },
    }


def test_manifest_roll_config_is_translated(base):
    result = validate(_manifest(base))
    assert result.problems == [], [p.render() for p in result.problems]
    assert result.spec.backend_config.data.train_batch_size == 8
    assert result.backend_config.trainer.default_local_dir.startswith("/out/roll/")


def test_manifest_sizes_the_batch_rule_from_the_pools(base):
    del base["actor_train"]["device_mapping"], base["actor_infer"]["device_mapping"]
    result = validate(_manifest(base))
    assert result.problems == [], [p.render() for p in result.problems]
    assert result.backend_config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 4


def test_manifest_device_mapping_must_match_the_pools(base):
    base["actor_train"]["device_mapping"] = [0, 1, 2, 3]
    base["actor_infer"]["device_mapping"] = [0, 1, 2, 3]
    base["actor_train"]["training_args"]["gradient_accumulation_steps"] = 2
    (problem,) = validate(_manifest(base)).errors
    assert problem.path == "spec.roll_config.actor_train.device_mapping"
    assert "does not match the worker pools (2)" in problem.message


def test_manifest_problem_paths_carry_the_spec_prefix(base):
    base["whiten_rewards"] = True
    (problem,) = validate(_manifest(base)).errors
    assert problem.path == "spec.roll_config.whiten_rewards"


def test_manifest_with_both_configs_is_rejected(base):
    result = validate(_manifest(base, backend_config={"data": {}}))
    assert [p.message for p in result.errors] == [
        "a spec holds backend_config or roll_config, not both"
    ]


def test_manifest_with_neither_config_is_rejected(base):
    raw = _manifest(base)
    del raw["spec"]["roll_config"]
    (problem,) = validate(raw).errors
    assert (problem.path, problem.message) == ("spec.backend_config", "required key is missing")


def test_crd_accepts_roll_config_and_says_exactly_one():
    crd = yaml.safe_load((ROOT / "crds" / "rltrainingjobs.kuberl.io.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert "backend_config" not in spec["required"]
    assert spec["properties"]["roll_config"]["x-kubernetes-preserve-unknown-fields"] is True
    assert spec["x-kubernetes-validations"][0]["rule"] == (
        "[has(self.backend_config), has(self.roll_config), has(self.sft_config)].exists_one(x, x)"
    )
