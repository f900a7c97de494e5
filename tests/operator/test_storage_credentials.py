"""spec.storage.credentials.secretRef reaches the ranks' containers by reference only."""

import json
from typing import Any

from kuberl_api.validation import parse_document, validate_document
from kuberl_operator.builders import JobRef, build_raycluster
from support.manifests import valid_manifest, with_changes

JOB = JobRef("grpo", "team-a", "uid-123")
MIRROR = "spec.backend_config.trainer.default_hdfs_dir"


def raycluster(changes: dict[str, Any]) -> dict[str, Any]:
    result = validate_document(parse_document(with_changes(valid_manifest(), changes)))
    assert result.ok, [p.render() for p in result.errors]
    return build_raycluster(JOB, result.spec, 1, "default:img")


def test_the_worker_gets_the_secret_by_reference_and_its_name_the_head_neither():
    secret = {"spec.storage": {"credentials": {"secretRef": {"name": "job-s3"}}}}
    rc = raycluster({MIRROR: "s3://bucket/run", **secret})
    worker = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert worker["envFrom"] == [{"secretRef": {"name": "job-s3"}}]
    assert {"name": "KUBERL_STORAGE_SECRET", "value": "job-s3"} in worker["env"]
    assert "envFrom" not in head
    assert "KUBERL_STORAGE_SECRET" not in json.dumps(head)


def test_without_credentials_no_container_gets_env_from():
    rc = raycluster({})
    assert "envFrom" not in json.dumps(rc)
