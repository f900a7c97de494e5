"""Pod template pieces shared by the head and every worker group."""

from typing import Any

from kuberl_api.job import RLTrainingJobSpec
from kuberl_api.platform import Toleration, VolumeSource
from kuberl_api.storage import output_location
from kuberl_operator.builders.common import JobRef, dump

OUTPUT_VOLUME = "af-output"
MODEL_VOLUME = "model"
SHM_VOLUME = "dshm"
# Ray containers run with a read-only root filesystem. This emptyDir at /tmp takes what they
# write outside the job's volumes: Ray's session dir (/tmp/ray), temp files, and HOME-relative
# caches (HOME=/tmp: Hugging Face, vLLM, Triton, matplotlib) unless the job sets HOME itself.
TMP_VOLUME = "tmp"
WRITABLE_DIR = "/tmp"
RUN_AS_USER = 1000  # the `ray` user of the Ray images
# Rank 0 serves its training metrics on this port of its pod (KUBERL_METRICS_PORT).
RUNTIME_METRICS_PORT_NUMBER = 8090


def volume_source(name: str, source: VolumeSource) -> dict[str, Any]:
    if source.claim_name:
        claim = {"claimName": source.claim_name, "readOnly": source.read_only}
        return {"name": name, "persistentVolumeClaim": claim}
    assert source.host_path, "validation guarantees a claim or a host path"
    return {"name": name, "hostPath": {"path": source.host_path, "type": "DirectoryOrCreate"}}


def volumes_and_mounts(
    spec: RLTrainingJobSpec, shm_size: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The af_output_dir volume at the same path everywhere, the model volume, /dev/shm and a
    writable /tmp."""
    volumes = [
        {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}},
        {"name": TMP_VOLUME, "emptyDir": {}},
    ]
    mounts = [
        {"name": SHM_VOLUME, "mountPath": "/dev/shm"},
        {"name": TMP_VOLUME, "mountPath": WRITABLE_DIR},
    ]
    output = spec.storage.output
    if output and (output.claim_name or output.host_path):
        volumes.append(volume_source(OUTPUT_VOLUME, output))
        # an af_output_dir URL: the volume holds its staging directory (kuberl_api.storage)
        mounts.append({"name": OUTPUT_VOLUME, "mountPath": output_location(spec.af_output_dir)})
    model = spec.storage.model
    if model and (model.claim_name or model.host_path):
        volumes.append(volume_source(MODEL_VOLUME, model))
        mounts.append({"name": MODEL_VOLUME, "mountPath": model.mount_path, "readOnly": True})
    return volumes, mounts


def container_env(job: JobRef, spec: RLTrainingJobSpec) -> list[dict[str, Any]]:
    # valueFrom references (secrets) travel as references; their values never pass through here.
    user = [dump(var) for var in spec.env]
    own = [
        {"name": "KUBERL_JOB_NAME", "value": job.name},
        {"name": "KUBERL_JOB_NAMESPACE", "value": job.namespace},
        {"name": "KUBERL_METRICS_PORT", "value": str(RUNTIME_METRICS_PORT_NUMBER)},
        {"name": "HOME", "value": WRITABLE_DIR},  # the image's HOME is on the read-only root
    ]
    names = {var["name"] for var in user}
    return user + [var for var in own if var["name"] not in names]


def pod_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        # Without it the kubelet chowns the whole output volume at every attempt's start.
        "fsGroupChangePolicy": "OnRootMismatch",
        # Pod Security `restricted` requires a seccomp profile; the runtime's default suffices.
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def tolerations(items: list[Toleration]) -> list[dict[str, Any]]:
    return [dump(t) for t in items]


def pod_spec(
    job: JobRef,
    spec: RLTrainingJobSpec,
    container: dict[str, Any],
    volumes: list[dict[str, Any]],
    service_account: str,
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "serviceAccountName": service_account,
        "securityContext": pod_security_context(),
        "containers": [container],
        "volumes": volumes,
    }
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = [dump(s) for s in spec.image_pull_secrets]
    if spec.scheduling.priority_class_name:
        pod["priorityClassName"] = spec.scheduling.priority_class_name
    return pod
