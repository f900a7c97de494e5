"""Bad input against the real API server and the running operator.

Every manifest of the validator's table (support.bad_inputs) plus manifest-level mistakes is
sent to kube-apiserver with a server-side dry run, as `kubectl apply` does (strict field
validation). What the CRD's schema and CEL rules can express is rejected there, with a message
naming the field. What they cannot (verl's cross-field rules) is admitted; those are all applied
for real at once and must each end as `Validated=False` naming the field, with nothing created
for them and the operator still alive.
"""

import json
import subprocess
from typing import Any

import pytest
import yaml

from support.bad_inputs import BC, CASES
from support.manifests import valid_manifest, with_changes
from support.rljobs import GROUP, PLURAL, VERSION, wait_for

pytestmark = pytest.mark.cluster

_POOL = {"name": "gpu", "nodes": 1, "accelerator": {"type": "nvidia.com/gpu", "perNode": 4}}

# Mistakes in the envelope (the schema's job, not the verl validator's): changes, path named.
MANIFEST_CASES = [
    ({"spec.workerPools": "gpu"}, "spec.workerPools"),
    ({"spec.replicas": 3}, "spec.replicas"),
    ({"spec.af_output_dir": 12345}, "spec.af_output_dir"),
    ({"spec.backend_config": "data: {}"}, "spec.backend_config"),
    ({"spec.imagePullPolicy": "Sometimes"}, "spec.imagePullPolicy"),
    ({"spec.runPolicy.activeDeadlineSeconds": -5}, "spec.runPolicy.activeDeadlineSeconds"),
    ({"spec.runPolicy.backoffLimit": 10**15}, "spec.runPolicy.backoffLimit"),
    ({"spec.runPolicy.cleanupPolicy": "Never"}, "spec.runPolicy.cleanupPolicy"),
    ({"spec.workerPools[0].nodes": 10**9}, "spec.workerPools[0].nodes"),
    ({"spec.workerPools[0].accelerator.perNode": 4096}, "spec.workerPools[0].accelerator.perNode"),
    ({"spec.workerPools": [_POOL] * 17}, "spec.workerPools"),
    ({"spec.env": [{"name": f"V{i}", "value": "x"} for i in range(65)]}, "spec.env"),
    ({f"{BC}.data.max_prompt_length": 10**9}, f"{BC}.data.max_prompt_length"),
    ({f"{BC}.trainer": ["not", "a", "map"]}, f"{BC}.trainer"),
    ({"spec.roll_config": {"actor_train": {}}}, "spec"),  # CEL: exactly one of the two
]


# Where the API server spells a path differently: a duplicate key of a list-map names the item.
_SERVER_PATH = {"spec.workerPools[1].name": "spec.workerPools[1]"}


def bad_manifests() -> list[tuple[dict[str, Any], str]]:
    table = [(changes, path) for changes, path, _ in CASES] + MANIFEST_CASES
    return [
        (with_changes(valid_manifest(), {**changes, "metadata.name": f"bad-{i}"}), path)
        for i, (changes, path) in enumerate(table)
    ]


def dry_run_rejection(custom: Any, namespace: str, body: dict[str, Any]) -> str | None:
    """The API server's message when it refuses `body`, or None when it would admit it."""
    from kubernetes.client.exceptions import ApiException

    try:
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, body, dry_run="All", field_validation="Strict"
        )
    except ApiException as err:
        assert err.status in (400, 422), err.body
        return json.loads(err.body)["message"]
    return None


def test_bad_manifests_are_rejected_naming_the_field(jobs, operator_process, ray_head):
    manifests = bad_manifests()
    assert len(manifests) >= 60
    admitted = []
    for body, path in manifests:
        message = dry_run_rejection(jobs.custom, jobs.namespace, body)
        if message is None:
            admitted.append((body, path))
        else:
            path = _SERVER_PATH.get(path, path)
            assert path in message, f"{body['metadata']['name']}: {path} not in {message}"
    assert admitted  # verl's cross-field rules, which a schema cannot express
    print(f"{len(manifests) - len(admitted)} rejected by the API server, {len(admitted)} admitted")

    for body, _ in admitted:
        jobs.apply(body)

    def all_validated() -> bool:
        return all(jobs.condition(b["metadata"]["name"], "Validated") for b, _ in admitted)

    wait_for("a Validated condition on every admitted bad job", all_validated, timeout=90)
    for body, path in admitted:
        name = body["metadata"]["name"]
        validated = jobs.condition(name, "Validated")
        assert validated["status"] == "False" and validated["reason"] == "InvalidSpec", name
        assert path in validated["message"], f"{name}: {path} not in {validated['message']}"
        assert jobs.status(name)["phase"] == "Failed"
        assert ray_head["client"].get(f"{name}-1") is None
    assert jobs.rayclusters() == []
    assert operator_process.process.poll() is None and operator_process.get("/healthz")


def test_malformed_yaml_is_rejected_by_kubectl(local_cluster, kubectl_bin, job_namespace):
    text = yaml.safe_dump(with_changes(valid_manifest(), {"metadata.name": "broken"}))
    broken = text.replace("  workerPools:\n", "  workerPools:\n   - {name: [gpu\n", 1)
    result = subprocess.run(
        [kubectl_bin, f"--kubeconfig={local_cluster.kubeconfig}", "-n", job_namespace,
         "apply", "--dry-run=server", "-f", "-"],
        input=broken, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "yaml" in result.stderr.lower() and "line" in result.stderr, result.stderr
