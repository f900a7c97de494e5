"""Remote model and data paths (issue 30 item 1): validated in the one resolver, and the plan
keeps each URL with the local cache path the runtime reads it from (plan/remote_inputs.py)."""

from pathlib import Path
from typing import Any

import pytest

from kuberl_api.plan import RunPlan
from kuberl_api.plan.from_document import plan_tree, plan_validated
from kuberl_api.validation import parse_document, validate_document
from support.manifests import valid_manifest, valid_sft_manifest, with_changes

BC = "spec.backend_config"
MODEL = f"{BC}.actor_rollout_ref.model.path"
TRAIN = f"{BC}.data.train_files"
SECRET = {"spec.storage": {"credentials": {"secretRef": {"name": "job-s3"}}}}


def remote_plan(tmp_path: Path) -> RunPlan:
    """A bare config whose model and training data are s3:// URLs, planned."""
    plan = plan_tree(
        {
            "data": {
                "train_files": "s3://bucket/data/train.parquet",
                "train_batch_size": 4,
                "max_prompt_length": 16,
                "max_response_length": 8,
            },
            "actor_rollout_ref": {
                "model": {"path": "s3://bucket/models/tiny"},
                "actor": {"ppo_mini_batch_size": 2, "ppo_micro_batch_size_per_gpu": 2},
                "rollout": {"name": "hf", "n": 2, "log_prob_micro_batch_size_per_gpu": 2},
                "ref": {"log_prob_micro_batch_size_per_gpu": 2},
            },
            "critic": {"enable": True, "ppo_micro_batch_size_per_gpu": 2},
            "algorithm": {"adv_estimator": "gae"},
            "trainer": {
                "device": "cpu",
                "nnodes": 1,
                "n_gpus_per_node": 1,
                "default_local_dir": str(tmp_path / "out"),
            },
        }
    )
    assert isinstance(plan, RunPlan)
    return plan


def _errors(changes: dict[str, Any]) -> dict[str, str]:
    result = validate_document(parse_document(with_changes(valid_manifest(), changes)))
    return {p.path: p.render() for p in result.errors}


def test_the_plan_keeps_each_url_and_its_cache_path(tmp_path):
    plan = remote_plan(tmp_path)
    cache = str(tmp_path / "out" / "cache" / "inputs")
    assert plan.paths.input_cache_dir == cache
    assert [(i.url, i.local_path) for i in plan.paths.remote_inputs] == [
        ("s3://bucket/models/tiny", f"{cache}/s3/bucket/models/tiny"),
        ("s3://bucket/data/train.parquet", f"{cache}/s3/bucket/data/train.parquet"),
    ]
    # The plan's own fields keep the URLs: the runtime swaps in the copies once they are there.
    assert plan.model.path == "s3://bucket/models/tiny"
    assert plan.critic.model.path == "s3://bucket/models/tiny"


def test_a_job_reads_its_cache_under_its_output_volume():
    manifest = with_changes(
        valid_manifest(), {MODEL: "s3://bucket/models/tiny", TRAIN: "s3://b/t.parquet", **SECRET}
    )
    result = validate_document(parse_document(manifest))
    assert result.ok, [p.render() for p in result.errors]
    plan = plan_validated(result.backend_config, result.af_output_dir)
    assert result.af_output_dir
    assert plan.paths.input_cache_dir == f"{result.af_output_dir}/cache/inputs"
    assert {i.url for i in plan.paths.remote_inputs} == {
        "s3://bucket/models/tiny",
        "s3://b/t.parquet",
    }


def test_hub_ids_and_mounted_paths_are_read_as_they_are():
    manifest = with_changes(valid_manifest(), {MODEL: "Qwen/Qwen2.5-0.5B-Instruct"})
    result = validate_document(parse_document(manifest))
    assert result.ok, [p.render() for p in result.errors]
    plan = plan_validated(result.backend_config, result.af_output_dir)
    assert plan.paths.remote_inputs == []
    assert plan.model.path == "Qwen/Qwen2.5-0.5B-Instruct"


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (MODEL, "ftp://host/models/x", "scheme ftp:// is not one kuberl reads"),
        (MODEL, "s3:///models/x", "names no bucket"),
        (TRAIN, "file://relative/train.parquet", "write file:///absolute/path"),
        (f"{BC}.critic.model.path", "hf://org/model", "scheme hf:// is not one kuberl reads"),
    ],
)
def test_a_bad_input_url_is_refused_naming_the_key(key, value, says):
    errors = _errors({key: value, **SECRET})
    assert key in errors, errors
    assert says in errors[key] and value in errors[key]


def test_a_remote_input_without_credentials_names_the_secret_to_set():
    errors = _errors({MODEL: "s3://bucket/models/x", TRAIN: "s3://bucket/models/x"})
    assert list(errors) == [MODEL]  # one problem per URL
    message = errors[MODEL]
    assert "needs credentials" in message and "AWS_ACCESS_KEY_ID" in message
    assert "spec.storage.credentials.secretRef.name" in message


def test_an_sft_plan_keeps_its_remote_inputs():
    sft = "spec.sft_config"
    changes = {
        f"{sft}.model.path": "s3://bucket/models/tiny",
        f"{sft}.data.train_files": "s3://bucket/sft/train.parquet",
        **SECRET,
    }
    result = validate_document(parse_document(with_changes(valid_sft_manifest(), changes)))
    assert result.ok, [p.render() for p in result.errors]
    plan = plan_validated(result.sft_config, result.af_output_dir)
    assert [i.url for i in plan.paths.remote_inputs] == [
        "s3://bucket/models/tiny",
        "s3://bucket/sft/train.parquet",
    ]


SFT = "spec.sft_config"


def test_sft_mirrors_its_checkpoints_as_rl_does():
    """trainer.default_hdfs_dir, refused for SFT before, is the SFT plan's checkpoint mirror."""
    changes = {f"{SFT}.trainer.default_hdfs_dir": "s3://bucket/sft-runs/", **SECRET}
    result = validate_document(parse_document(with_changes(valid_sft_manifest(), changes)))
    assert result.ok, [p.render() for p in result.errors]
    plan = plan_validated(result.sft_config, result.af_output_dir)
    assert plan.trainer.checkpoint_mirror == "s3://bucket/sft-runs"


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        (f"{SFT}.trainer.default_hdfs_dir", "ftp://h/x", "scheme ftp:// is not one kuberl reads"),
        (f"{SFT}.model.path", "s3:///models/x", "names no bucket"),
        (f"{SFT}.data.train_files", "s3://bucket/t.parquet", "needs credentials"),
    ],
)
def test_sft_urls_are_refused_naming_the_key(key, value, says):
    manifest = with_changes(valid_sft_manifest(), {key: value})
    result = validate_document(parse_document(manifest))
    errors = {p.path: p.render() for p in result.errors}
    assert key in errors, errors
    assert says in errors[key] and value in errors[key]
