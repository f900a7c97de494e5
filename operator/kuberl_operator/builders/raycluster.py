"""``build_raycluster``: one RayCluster (ray.io/v1) per attempt of a job.

The head carries no accelerators and advertises no CPUs to Ray (``num-cpus: "0"``) so no
training actor lands on it; each worker pool becomes one worker group of fixed size.
"""

from typing import Any

from kuberl_api.accelerators import NO_ACCELERATOR, kind_of_resource
from kuberl_api.job import RLTrainingJobSpec
from kuberl_api.platform import WorkerPool
from kuberl_operator.builders.common import (
    JobRef,
    child_labels,
    quantity_bytes,
    shared_memory_size,
)
from kuberl_operator.builders.hostnet import apply_host_network
from kuberl_operator.builders.network import auth_options
from kuberl_operator.builders.pods import (
    RUNTIME_METRICS_PORT_NUMBER,
    container_env,
    container_security_context,
    pod_spec,
    tolerations,
    volumes_and_mounts,
)
from kuberl_operator.builders.storage import add_storage_credentials
from kuberl_operator.names import raycluster_name, runtime_account_name

RAY_VERSION = "2.60.0"
DASHBOARD_PORT = 8265
HEAD_PORTS = [
    {"name": "gcs-server", "containerPort": 6379},
    {"name": "dashboard", "containerPort": DASHBOARD_PORT},
    {"name": "client", "containerPort": 10001},
    {"name": "metrics", "containerPort": 8080},
]
# Rank 0 serves the step's training metrics here (kuberl_runtime.tracking.prometheus); rank 0 may
# land on any pod of the job, so every Ray container declares the port the PodMonitor scrapes.
RUNTIME_METRICS_PORT = {"name": "runtime-metrics", "containerPort": RUNTIME_METRICS_PORT_NUMBER}


def build_raycluster(
    job: JobRef,
    spec: RLTrainingJobSpec,
    attempt: int,
    default_image: str,
    token_key_id: str | None = None,
) -> dict[str, Any]:
    labels = child_labels(job, attempt, spec.scheduling.queue_name)
    metadata = job.metadata(raycluster_name(job.name, attempt), labels)
    image = spec.image or default_image
    raycluster = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": metadata,
        "spec": {
            "rayVersion": RAY_VERSION,
            "enableInTreeAutoscaling": False,
            # KubeRay sets RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (from the job's Secret) on
            # every Ray container, its injected init containers included (docs/security.md).
            "authOptions": auth_options(job, token_key_id),
            "headGroupSpec": _head_group(job, spec, image, labels),
            "workerGroupSpecs": [
                _worker_group(job, spec, pool, image, labels) for pool in spec.worker_pools
            ],
        },
    }
    if spec.network == "hostNetwork":
        apply_host_network(raycluster)
    return raycluster


def _container(
    name: str, image: str, spec: RLTrainingJobSpec, job: JobRef, resources: dict[str, Any]
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "resources": resources,
        "env": container_env(job, spec),
        "securityContext": container_security_context(),
    }
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    return container


def _head_group(
    job: JobRef, spec: RLTrainingJobSpec, image: str, labels: dict[str, str]
) -> dict[str, Any]:
    head = spec.head
    resources = {
        "requests": {"cpu": str(head.cpu), "memory": str(head.memory)},
        "limits": {"cpu": str(head.cpu), "memory": str(head.memory)},
    }
    shm = shared_memory_size(head.memory, None)
    volumes, mounts = volumes_and_mounts(spec, shm)
    container = _container("ray-head", image, spec, job, resources)
    container["ports"] = [*HEAD_PORTS, RUNTIME_METRICS_PORT]
    container["volumeMounts"] = mounts
    pod = pod_spec(job, spec, container, volumes, runtime_account_name(job.name))
    if head.node_selector:
        pod["nodeSelector"] = dict(head.node_selector)
    if head.tolerations:
        pod["tolerations"] = tolerations(head.tolerations)
    return {
        "serviceType": "ClusterIP",
        # The operator reaches the dashboard through the head Service, so it listens on the pod's
        # addresses; the token and the job's NetworkPolicy guard it (docs/security.md).
        "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0"},
        "template": {"metadata": {"labels": labels}, "spec": pod},
    }


def _worker_group(
    job: JobRef, spec: RLTrainingJobSpec, pool: WorkerPool, image: str, labels: dict[str, str]
) -> dict[str, Any]:
    requests = {"cpu": str(pool.cpu), "memory": str(pool.memory)}
    limits = {"memory": str(pool.memory)}
    accelerator = pool.accelerator
    if accelerator.type != NO_ACCELERATOR:
        # Extended resources must request exactly what they limit.
        requests[accelerator.type] = limits[accelerator.type] = str(accelerator.per_node)
    shm = shared_memory_size(pool.memory, pool.shared_memory)
    assert quantity_bytes(shm) > 0
    volumes, mounts = volumes_and_mounts(spec, shm)
    container = _container("ray-worker", image, spec, job, {"requests": requests, "limits": limits})
    container["ports"] = [RUNTIME_METRICS_PORT]
    add_storage_credentials(container, spec)  # the ranks only, never the head's driver
    container["volumeMounts"] = mounts
    pod = pod_spec(job, spec, container, volumes, runtime_account_name(job.name))
    if pool.node_selector:
        pod["nodeSelector"] = dict(pool.node_selector)
    if pool.tolerations:
        pod["tolerations"] = tolerations(pool.tolerations)
    if pool.affinity:
        pod["affinity"] = pool.affinity
    if pool.scheduler_name:
        pod["schedulerName"] = pool.scheduler_name  # e.g. volcano for Ascend chip topology
    group: dict[str, Any] = {
        "groupName": pool.name,
        "replicas": pool.nodes,
        "minReplicas": pool.nodes,
        "maxReplicas": pool.nodes,
        "rayStartParams": {},
        "template": {"metadata": {"labels": {**labels, "kuberl.io/pool": pool.name}}, "spec": pod},
    }
    kind = kind_of_resource(accelerator.type)
    if not kind.kuberay_maps_resource:
        # The Ray resource a rank asks for (NPU), which KubeRay does not derive from the limit.
        group["resources"] = {kind.ray_resource: str(accelerator.per_node)}
    return group
