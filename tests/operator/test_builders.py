"""Table-driven tests of the pure builders: spec in, RayCluster / RBAC / submission out."""

from typing import Any

import pytest

from kuberl_api.plan import RunPlan
from kuberl_api.plan.version import PLAN_VERSION
from kuberl_api.validation import parse_document, validate_document
from kuberl_operator.builders import (
    JobRef,
    accelerator_summary,
    build_raycluster,
    build_runtime_rbac,
    build_submission,
)
from kuberl_operator.builders.common import quantity_bytes, shared_memory_size
from support.manifests import valid_manifest, with_changes

JOB = JobRef("grpo", "team-a", "uid-123")
CPU_POOL = {"name": "cpu", "nodes": 2, "cpu": "4", "memory": "8Gi"}
CPU_ONLY = {
    "spec.workerPools": [CPU_POOL],
    "spec.storage": {"output": {"claimName": "af-shared"}},  # two nodes need shared outputs
    "spec.backend_config.actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
}
NPU_POOL = {
    "name": "npu",
    "nodes": 1,
    "accelerator": {"type": "huawei.com/Ascend910", "perNode": 4},
    "memory": "64Gi",
    "schedulerName": "volcano",
    "nodeSelector": {"accelerator": "huawei-Ascend910"},
    "tolerations": [{"key": "huawei.com/Ascend910", "operator": "Exists"}],
}


def validated(changes: dict[str, Any]):
    result = validate_document(parse_document(with_changes(valid_manifest(), changes)))
    assert result.ok, [p.render() for p in result.errors]
    return result


def cluster(changes: dict[str, Any], attempt: int = 1) -> dict[str, Any]:
    return build_raycluster(JOB, validated(changes).spec, attempt, "default:img")


def worker(rc: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return rc["spec"]["workerGroupSpecs"][index]


def container(group: dict[str, Any]) -> dict[str, Any]:
    return group["template"]["spec"]["containers"][0]


def test_gpu_pool_requests_and_limits_gpus():
    group = worker(cluster({}))
    resources = container(group)["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"] == "4"
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (1, 1, 1)
    assert "resources" not in group  # KubeRay derives num-gpus from the limit itself


def test_npu_pool_declares_the_ray_npu_resource_and_volcano():
    rc = cluster(
        {
            "spec.workerPools": [NPU_POOL],
            "spec.backend_config.actor_rollout_ref.rollout.name": "hf",
        }
    )
    group = worker(rc)
    assert group["resources"] == {"NPU": "4"}
    assert container(group)["resources"]["limits"]["huawei.com/Ascend910"] == "4"
    pod = group["template"]["spec"]
    assert pod["schedulerName"] == "volcano"
    assert pod["nodeSelector"] == {"accelerator": "huawei-Ascend910"}
    assert pod["tolerations"] == [{"key": "huawei.com/Ascend910", "operator": "Exists"}]


def test_cpu_only_pool_has_no_accelerators():
    rc = cluster(CPU_ONLY)
    limits = container(worker(rc))["resources"]["limits"]
    assert set(limits) == {"memory"}
    assert worker(rc)["replicas"] == 2


def test_head_has_no_accelerators_and_no_cpus_for_ray():
    head = cluster({})["spec"]["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    resources = container(head)["resources"]
    assert not any("/" in key for key in {**resources["limits"], **resources["requests"]})
    assert {"name": "dashboard", "containerPort": 8265} in container(head)["ports"]


@pytest.mark.parametrize(
    ("queue", "labels"),
    [(None, set()), ("team-a-queue", {"kueue.x-k8s.io/queue-name"})],
)
def test_queue_label_only_when_queued(queue, labels):
    rc = cluster({"spec.scheduling": {"queueName": queue}} if queue else {})
    assert {"kuberl.io/job", "kuberl.io/attempt"} | labels == set(rc["metadata"]["labels"])
    if queue:
        assert rc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == queue


def test_priority_class_pull_secrets_and_image():
    rc = cluster(
        {
            "spec.scheduling": {"priorityClassName": "high"},
            "spec.imagePullSecrets": [{"name": "regcred"}],
            "spec.image": "registry/runtime:1",
        }
    )
    for group in (rc["spec"]["headGroupSpec"], worker(rc)):
        pod = group["template"]["spec"]
        assert pod["priorityClassName"] == "high"
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert pod["containers"][0]["image"] == "registry/runtime:1"
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["serviceAccountName"] == "grpo-runtime"


def test_default_image_when_spec_has_none():
    assert container(worker(cluster({})))["image"] == "default:img"


def test_output_and_model_volumes_mount_everywhere_at_the_same_path():
    rc = cluster(
        {
            "spec.storage": {
                "output": {"claimName": "af-shared"},
                "model": {"claimName": "models", "mountPath": "/models", "readOnly": True},
            }
        }
    )
    for group in (rc["spec"]["headGroupSpec"], worker(rc)):
        pod = group["template"]["spec"]
        mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
        assert mounts["af-output"]["mountPath"] == "/mnt/af/t"
        assert mounts["model"] == {"name": "model", "mountPath": "/models", "readOnly": True}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["af-output"]["persistentVolumeClaim"]["claimName"] == "af-shared"


def test_every_ray_container_serves_runtime_metrics_where_the_podmonitor_scrapes():
    """Rank 0 may run on any pod: each declares the port and tells the runtime to serve on it."""
    rc = cluster({})
    for group in (rc["spec"]["headGroupSpec"], worker(rc)):
        c = container(group)
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["KUBERL_METRICS_PORT"] == str(ports["runtime-metrics"])


@pytest.mark.parametrize(
    ("memory", "shared", "expected"),
    [("32Gi", None, "16Gi"), ("1Gi", None, "512Mi"), ("32Gi", "8Gi", "8Gi"), ("3G", None, "1500M")],
)
def test_shm_size(memory, shared, expected):
    got = shared_memory_size(memory, shared)
    assert quantity_bytes(got) == quantity_bytes(expected)


def test_ray_containers_have_a_read_only_root_and_a_writable_tmp_home():
    """Ray's session dir and HOME-relative caches land on the /tmp emptyDir; a job's own HOME
    wins. tests/realpods/test_grpo.py runs a job this way in real pods."""
    rc = cluster({})
    for group in (rc["spec"]["headGroupSpec"], worker(rc)):
        c, pod = container(group), group["template"]["spec"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        (tmp,) = (m for m in c["volumeMounts"] if m["mountPath"] == "/tmp")
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes[tmp["name"]] == {"name": "tmp", "emptyDir": {}}
        assert {"name": "HOME", "value": "/tmp"} in c["env"]
    own = cluster({"spec.env": [{"name": "HOME", "value": "/work"}]})
    homes = [e for e in container(worker(own))["env"] if e["name"] == "HOME"]
    assert homes == [{"name": "HOME", "value": "/work"}]


def test_shm_volume_uses_memory_medium_sized_from_the_pool():
    rc = cluster({"spec.workerPools[0].sharedMemory": "24Gi"})
    volumes = {v["name"]: v for v in worker(rc)["template"]["spec"]["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "24Gi"}


def test_owner_reference_points_at_the_job():
    rc = cluster({}, attempt=3)
    assert rc["metadata"]["name"] == "grpo-a3"
    [owner] = rc["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "kuberl.io/v1alpha1",
        "kind": "RLTrainingJob",
        "name": "grpo",
        "uid": "uid-123",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_secret_env_travels_as_a_reference():
    secret = {"secretKeyRef": {"name": "wandb", "key": "token"}}
    rc = cluster({"spec.env": [{"name": "WANDB_API_KEY", "valueFrom": secret}]})
    env = container(worker(rc))["env"]
    assert {"name": "WANDB_API_KEY", "valueFrom": secret} in env
    assert {"name": "KUBERL_JOB_NAME", "value": "grpo"} in env


def test_runtime_rbac_allows_only_its_own_status():
    account, role, binding = build_runtime_rbac(JOB)
    assert account["kind"] == "ServiceAccount" and account["metadata"]["name"] == "grpo-runtime"
    assert role["rules"] == [
        {
            "apiGroups": ["kuberl.io"],
            "resources": ["rltrainingjobs/status"],
            "verbs": ["get", "patch"],
            "resourceNames": ["grpo"],
        }
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "grpo-runtime", "namespace": "team-a"}
    ]
    assert all(obj["metadata"]["ownerReferences"][0]["uid"] == "uid-123" for obj in (
        account, role, binding))  # fmt: skip


@pytest.mark.parametrize(("attempt", "resume_mode"), [(1, "disable"), (2, "auto"), (5, "auto")])
def test_submission_carries_the_resolved_plan(attempt, resume_mode):
    result = validated({"spec.backend_config.trainer": {"resume_mode": "disable"}})
    payload = build_submission(JOB, "/mnt/af/t", result.backend_config, attempt)
    assert payload["submission_id"] == f"grpo-{attempt}"
    digest = payload["metadata"].pop("kuberl.io/source-digest")
    assert payload["metadata"] == {
        "kuberl.io/job": "grpo",
        "kuberl.io/namespace": "team-a",
        "kuberl.io/uid": "uid-123",
        "kuberl.io/attempt": str(attempt),
        "kuberl.io/plan-version": str(PLAN_VERSION),
    }
    assert payload["entrypoint"].endswith(
        f"exec kuberl train --plan /mnt/af/t/.kuberl/grpo-{attempt}.plan.json"
    )
    plan = RunPlan.from_json(payload["runtime_env"]["env_vars"]["KUBERL_PLAN_JSON"])
    placement = plan.placement
    assert (placement.nnodes, placement.n_gpus_per_node, placement.device) == (1, 4, "cuda")
    assert plan.paths.checkpoint_dir.startswith("/mnt/af/t/")
    assert plan.trainer.resume_mode == resume_mode
    assert plan.source_digest == digest


def test_accelerator_summary():
    assert accelerator_summary(validated({}).spec.worker_pools) == "4xnvidia.com/gpu"
    assert accelerator_summary(validated(CPU_ONLY).spec.worker_pools) == ("cpu")
