"""The Volcano PodGroup kuberl builds, checked against Volcano's own CRD.

contracts/scheduling.volcano.sh_podgroups.yaml is a copy of
github.com/volcano-sh/volcano config/crd/volcano/bases/scheduling.volcano.sh_podgroups.yaml
(master ed72c7c81, 2026-08-20; v1.16.0-alpha.1-42). The offline test validates against its
openAPIV3Schema and refuses any field the schema would prune; the cluster test creates the
PodGroup on the real API server with that CRD installed and reads back exactly what was sent.
"""

import copy
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from kuberl_api.job import RLTrainingJob
from kuberl_operator.builders import JobRef, build_raycluster
from kuberl_operator.gang import (
    GROUP_NAME_ANNOTATION,
    TASK_SPEC_ANNOTATION,
    annotate_for_volcano,
    build_podgroup,
)
from support.manifests import valid_manifest, with_changes

CRD = Path(__file__).parent / "contracts" / "scheduling.volcano.sh_podgroups.yaml"
JOB = JobRef("npu-run", "team-a", "0b6f1c2e-uid")


def _schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    return version["schema"]["openAPIV3Schema"]


def _podgroup() -> tuple[dict[str, Any], dict[str, Any]]:
    manifest = with_changes(
        valid_manifest(),
        {
            "metadata.name": JOB.name,
            "spec.workerPools": [
                {
                    "name": "npu",
                    "nodes": 2,
                    "cpu": "16",
                    "memory": "64Gi",
                    "accelerator": {"type": "huawei.com/Ascend910", "perNode": 8},
                    "schedulerName": "volcano",
                }
            ],
        },
    )
    spec = RLTrainingJob.model_validate(manifest).spec
    raycluster = build_raycluster(JOB, spec, 1, "img")
    annotate_for_volcano(raycluster)
    return build_podgroup(raycluster, JOB.owner_reference()), raycluster


def _pruned(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields of `value` that a structural schema does not declare (the API server drops them)."""
    if isinstance(value, dict) and "properties" in schema:
        found = []
        for key, item in value.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += _pruned(item, schema["properties"][key], f"{path}.{key}")
        return found
    return []


def test_the_podgroup_matches_volcanos_schema():
    podgroup, _ = _podgroup()
    schema = _schema()
    jsonschema.validate(podgroup, schema)
    body = {k: v for k, v in podgroup.items() if k != "metadata"}
    assert _pruned(body, schema) == []


def test_the_gang_is_every_ray_pod_with_its_summed_requests():
    podgroup, raycluster = _podgroup()
    spec = podgroup["spec"]
    assert spec["minMember"] == 3  # the head and two workers
    assert spec["minTaskMember"] == {"head": 1, "npu": 2}
    assert spec["minResources"]["huawei.com/Ascend910"] == "16"
    assert spec["minResources"]["cpu"] == "34000m"  # head 2 + 2 × 16
    assert podgroup["metadata"]["name"] == "npu-run-a1-pg"
    head = raycluster["spec"]["headGroupSpec"]["template"]
    worker = raycluster["spec"]["workerGroupSpecs"][0]["template"]
    assert head["metadata"]["annotations"][GROUP_NAME_ANNOTATION] == "npu-run-a1-pg"
    assert head["metadata"]["annotations"][TASK_SPEC_ANNOTATION] == "head"
    assert worker["metadata"]["annotations"][TASK_SPEC_ANNOTATION] == "npu"


@pytest.mark.cluster
def test_the_api_server_keeps_every_field(kube_api: Any, local_cluster: Any) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from support.rljobs import wait_for

    extensions = client.ApiextensionsV1Api(kube_api)
    crd = yaml.safe_load(CRD.read_text())
    try:
        extensions.create_custom_resource_definition(crd)
    except ApiException as err:
        assert err.status == 409, err

    def established() -> bool:
        found = extensions.read_custom_resource_definition(crd["metadata"]["name"])
        return any(c.type == "Established" and c.status == "True"
                   for c in found.status.conditions or [])  # fmt: skip

    wait_for("the PodGroup CRD Established", established)
    namespace = f"volcano-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(kube_api)
    core.create_namespace({"metadata": {"name": namespace}})
    try:
        podgroup, _ = _podgroup()
        podgroup["metadata"]["namespace"] = namespace
        del podgroup["metadata"]["ownerReferences"]  # no RLTrainingJob behind it here
        sent = copy.deepcopy(podgroup)
        stored = client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", namespace, "podgroups", podgroup
        )
        kept = {key: stored["spec"].get(key) for key in sent["spec"]}
        assert kept == sent["spec"], "the API server pruned or changed a field kuberl sets"
        assert stored["spec"]["queue"] == "default"  # the CRD's default: Volcano's default queue
    finally:
        core.delete_namespace(namespace)
