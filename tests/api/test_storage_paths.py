"""Remote paths (issue 30): default_hdfs_dir and resume_from_path URLs, credentials named, and a
multi-node job refused without shared or object storage for its checkpoints."""

from typing import Any

import pytest

from kuberl_api.plan.from_document import plan_validated
from kuberl_api.validation import parse_document, validate_document
from kuberl_operator.builders.pods import OUTPUT_VOLUME, volumes_and_mounts
from support.manifests import valid_manifest, with_changes

BC = "spec.backend_config"
MIRROR = f"{BC}.trainer.default_hdfs_dir"
SECRET = {"spec.storage": {"credentials": {"secretRef": {"name": "job-s3"}}}}


def _errors(changes: dict[str, Any]) -> dict[str, str]:
    result = validate_document(parse_document(with_changes(valid_manifest(), changes)))
    return {p.path: p.render() for p in result.errors}


@pytest.mark.parametrize(
    "url", ["s3://bucket/runs/a", "obs://bucket/a", "gs://bucket/a", "hdfs://nn:8020/a"]
)
def test_a_url_of_a_known_scheme_with_a_secret_validates_and_reaches_the_plan(url):
    manifest = with_changes(valid_manifest(), {MIRROR: url + "/", **SECRET})
    result = validate_document(parse_document(manifest))
    assert result.ok, [p.render() for p in result.errors]
    plan = plan_validated(result.backend_config, result.af_output_dir)
    assert plan.trainer.checkpoint_mirror == url


def test_a_file_url_needs_no_secret():
    assert _errors({MIRROR: "file:///mnt/backup/ckpt"}) == {}


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("ftp://host/x", "scheme ftp:// is not one kuberl reads"),
        ("s3:///no-bucket", "names no bucket"),
        ("file://relative/x", "write file:///absolute/path"),
        ("experiments/ppo", "must be a URL or an absolute path"),
    ],
)
def test_a_bad_mirror_is_refused_naming_the_key_and_the_fix(value, says):
    errors = _errors({MIRROR: value, **SECRET})
    assert list(errors) == [MIRROR]
    assert says in errors[MIRROR] and value in errors[MIRROR]
    assert "s3://bucket/prefix" in errors[MIRROR] or "set null" in errors[MIRROR]


@pytest.mark.parametrize("path", ["/mnt/backup/ppo", "~/experiments/ppo"])
def test_a_local_mirror_path_runs_as_verl_copies_there_with_a_warning(path):
    """verl copies checkpoints to a local default_hdfs_dir too (its documented example is
    ~/experiments/...): accepted, told that the copy lives on the saving pod's disk."""
    manifest = with_changes(valid_manifest(), {MIRROR: path + "/"})
    result = validate_document(parse_document(manifest))
    assert result.ok, [p.render() for p in result.errors]
    (warning,) = [p for p in result.warnings if p.path == MIRROR]
    assert "local path" in warning.render() and "s3://bucket/prefix" in warning.hint
    plan = plan_validated(result.backend_config, result.af_output_dir)
    assert plan.trainer.checkpoint_mirror == f"file://{path}"


def test_a_credentialed_scheme_without_a_secret_names_the_field_to_set():
    errors = _errors({MIRROR: "s3://bucket/a"})
    assert list(errors) == [MIRROR]
    message = errors[MIRROR]
    assert "needs credentials" in message and "AWS_ACCESS_KEY_ID" in message
    assert "spec.storage.credentials.secretRef.name" in message


def test_a_resume_url_is_copied_as_an_input_and_read_from_its_copy():
    resume = {f"{BC}.trainer.resume_mode": "resume_path", **SECRET}
    url = "s3://b/run/global_step_3"
    manifest = with_changes(valid_manifest(), {**resume, f"{BC}.trainer.resume_from_path": url})
    result = validate_document(parse_document(manifest))
    assert result.ok, [p.render() for p in result.errors]
    plan = plan_validated(result.backend_config, result.af_output_dir)
    (copied,) = [i for i in plan.paths.remote_inputs if i.url == url]
    assert copied.local_path == f"{plan.paths.input_cache_dir}/s3/b/run/global_step_3"
    assert plan.trainer.resume_from_path == url  # the runtime reads the copy (localized)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({}, "needs credentials"),  # no Secret named
        ({**SECRET, "url": "ftp://b/run/global_step_3"}, "scheme ftp:// is not one"),
    ],
)
def test_a_resume_url_needs_a_known_scheme_and_credentials(changes, says):
    changes = dict(changes)
    url = changes.pop("url", "s3://b/run/global_step_3")
    key = f"{BC}.trainer.resume_from_path"
    errors = _errors({**changes, f"{BC}.trainer.resume_mode": "resume_path", key: url})
    assert list(errors) == [key]
    assert says in errors[key] and url in errors[key]


def test_a_multi_node_job_needs_shared_or_object_storage():
    two_nodes = {
        "spec.workerPools[0].nodes": 2,
        f"{BC}.data.train_batch_size": 16,
        f"{BC}.actor_rollout_ref.actor.ppo_mini_batch_size": 8,
        f"{BC}.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 1,
    }
    errors = _errors(two_nodes)
    assert list(errors) == ["spec.storage.output"]
    assert "every retry starts again at step 0" in errors["spec.storage.output"]
    assert "claimName" in errors["spec.storage.output"]
    shared = {"spec.storage": {"output": {"claimName": "shared-rwx"}}}
    assert _errors({**two_nodes, **shared}) == {}
    assert _errors({**two_nodes, MIRROR: "s3://bucket/a", **SECRET}) == {}
    host_path = {"spec.storage": {"output": {"hostPath": "/data"}}}
    assert list(_errors({**two_nodes, **host_path})) == ["spec.storage.output"]


def test_the_secret_name_is_all_the_spec_holds():
    manifest = with_changes(valid_manifest(), {MIRROR: "s3://b/a", **SECRET})
    result = validate_document(parse_document(manifest))
    assert result.spec.storage.credentials.secret_ref.name == "job-s3"


OUT = "spec.af_output_dir"


def test_an_output_url_stages_locally_and_uploads_checkpoints_logs_and_model():
    manifest = with_changes(
        valid_manifest(),
        {
            OUT: "s3://bucket/runs/grpo/",
            "spec.storage": {
                "output": {"hostPath": "/data/cache"},
                **SECRET["spec.storage"],
            },
        },
    )
    result = validate_document(parse_document(manifest))
    assert result.ok, [p.render() for p in result.errors]
    paths = plan_validated(result.backend_config, result.af_output_dir).paths
    staging = "/tmp/kuberl-output/s3/bucket/runs/grpo"
    assert paths.output_dir == staging and paths.output_url == "s3://bucket/runs/grpo"
    assert paths.checkpoint_dir == f"{staging}/checkpoints/verl_examples/gsm8k"  # verl's default
    assert paths.logs_dir == f"{staging}/logs" and paths.input_cache_dir.startswith(staging)
    plan = plan_validated(result.backend_config, result.af_output_dir)
    assert plan.trainer.checkpoint_mirror == "s3://bucket/runs/grpo/checkpoints/verl_examples/gsm8k"
    # the output volume holds the staging directory (input cache, local steps across attempts)
    _, mounts = volumes_and_mounts(result.spec, "1Gi")
    assert {"name": OUTPUT_VOLUME, "mountPath": staging} in mounts
    # verl's default_hdfs_dir, when set, still names where checkpoints go
    both = with_changes(manifest, {MIRROR: "gs://other/ckpt"})
    result = validate_document(parse_document(both))
    assert plan_validated(
        result.backend_config, result.af_output_dir
    ).trainer.checkpoint_mirror == ("gs://other/ckpt")


@pytest.mark.parametrize(
    ("value", "changes", "says"),
    [
        ("s3://bucket/run", {}, "needs credentials"),
        ("ftp://host/run", SECRET, "scheme ftp:// is not one kuberl reads"),
        ("s3:///run", SECRET, "names no bucket"),
    ],
)
def test_a_bad_output_url_is_refused_at_af_output_dir(value, changes, says):
    errors = _errors({OUT: value, **changes})
    assert list(errors) == [OUT]
    assert says in errors[OUT] and value in errors[OUT]


def test_a_multi_node_job_may_keep_its_outputs_at_a_url():
    two_nodes = {
        "spec.workerPools[0].nodes": 2,
        f"{BC}.data.train_batch_size": 16,
        f"{BC}.actor_rollout_ref.actor.ppo_mini_batch_size": 8,
        f"{BC}.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 1,
    }
    assert _errors({**two_nodes, OUT: "s3://bucket/run", **SECRET}) == {}
    assert list(_errors({**two_nodes, OUT: "file:///mnt/nfs/run"})) == ["spec.storage.output"]
