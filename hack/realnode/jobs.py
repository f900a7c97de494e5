"""An RLTrainingJob in real pods on the real node: what a job manifest needs beyond the kwok path.

Used by the real-pod tests and `make demo`. There is no registry, no pod-IP CNI and no
kube-proxy here, so the job runs the imported CPU runtime image (never pulled) with
`spec.network: hostNetwork`, every pod selects and tolerates the real node, and the runtime
dials the apiserver at 127.0.0.1 (the node's namespace relays it to the host's, netns.py).
Its files live in host directories served as PersistentVolumes (`host_volume`): the output at
af_output_dir, the inputs read-only.
"""

from __future__ import annotations

import copy
from typing import Any

from realnode.images import REFERENCES
from realnode.node import REAL_NODE_LABEL

RUNTIME_IMAGE = REFERENCES["runtime-cpu"]
RUNTIME_UID = 1000  # the runtime image's `ray` user: owner of the output directory
PLACEMENT = {
    "nodeSelector": {REAL_NODE_LABEL: "true"},
    "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
}


def on_real_node(
    job: dict[str, Any],
    api_port: int,
    output_claim: str,
    inputs_claim: str,
    inputs_path: str,
    head_memory: str = "3Gi",
    worker_memory: str = "6Gi",
) -> dict[str, Any]:
    """A copy of `job` that runs in real pods: one head and one 1-CPU worker on the real node,
    af_output_dir on `output_claim`, `inputs_claim` mounted read-only at `inputs_path`."""
    job = copy.deepcopy(job)
    spec = job["spec"]
    spec.update(
        image=RUNTIME_IMAGE,
        imagePullPolicy="Never",
        network="hostNetwork",
        head={"cpu": "1", "memory": head_memory, **PLACEMENT},
        workerPools=[{"name": "cpu", "nodes": 1, "cpu": "1", "memory": worker_memory, **PLACEMENT}],
        storage={
            "output": {"claimName": output_claim},
            "model": {"claimName": inputs_claim, "mountPath": inputs_path, "readOnly": True},
        },
    )
    env = [var for var in spec.get("env", []) if var["name"] not in _ENV_NAMES]
    spec["env"] = env + [{"name": name, "value": value} for name, value in _env(api_port).items()]
    return job


def real_pod_job(
    job: dict[str, Any], api_port: int, inputs_dir: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`job` in real pods, and the PersistentVolumes + claims to apply first: af_output_dir
    (owned by RUNTIME_UID, the caller's to chown) and `inputs_dir`, read-only, which must hold
    the model and the data files (a ValueError names a path outside it)."""
    spec, namespace = job["spec"], job["metadata"]["namespace"]
    config = spec["backend_config"]
    for key, path in (
        ("actor_rollout_ref.model.path", config["actor_rollout_ref"]["model"]["path"]),
        ("data.train_files", config["data"]["train_files"]),
        ("data.val_files", config["data"].get("val_files")),
    ):
        for item in [path] if isinstance(path, str) else path or []:
            if not (item == inputs_dir or item.startswith(inputs_dir.rstrip("/") + "/")):
                raise ValueError(f"backend_config.{key} {item!r} lies outside {inputs_dir}")
    name = job["metadata"]["name"]
    output, inputs = f"{name}-output", f"{name}-inputs"
    volumes = host_volume(output, namespace, spec["af_output_dir"])
    volumes += host_volume(inputs, namespace, inputs_dir)
    return on_real_node(job, api_port, output, inputs, inputs_dir), volumes


def host_volume(name: str, namespace: str, path: str) -> list[dict[str, Any]]:
    """A PersistentVolume on a host directory and the claim `name` in `namespace` bound to it
    (labelled `kuberl.test/namespace`, so one selector deletes every such volume)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {"kuberl.test/namespace": namespace}},
            "spec": {
                "capacity": {"storage": "5Gi"},
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "hostPath": {"path": path, "type": "DirectoryOrCreate"},
                "claimRef": {"namespace": namespace, "name": name},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": name,
                "resources": {"requests": {"storage": "5Gi"}},
            },
        },
    ]


def _env(api_port: int) -> dict[str, str]:
    return {
        # No kube-proxy on this cluster: in-cluster clients dial 127.0.0.1, relayed (netns.py).
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(api_port),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }


_ENV_NAMES = frozenset(_env(0))
