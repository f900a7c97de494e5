"""Pod manifests for the real node: hostNetwork (there is no pod-IP CNI), the node's label and
toleration, images imported into its containerd (never pulled), and the `restricted` Pod
Security settings."""

from __future__ import annotations

import os
from typing import Any

import pytest
import realnode
from realnode import REAL_NODE_LABEL


def require_real_node_support() -> None:
    """Skip (fail under CI=true) where this machine cannot run the real node."""
    if reason := realnode.unsupported_reason():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the real-pod tier cannot run: {reason}", pytrace=False)
        pytest.skip(f"no real node on this machine ({reason}); kwok-only tiers still ran")


def restricted_security(uid: int) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def real_pod(name: str, image: str, command: list[str], uid: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "hostNetwork": True,
            "restartPolicy": "Never",
            "nodeSelector": {REAL_NODE_LABEL: "true"},
            "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": command,
                    "securityContext": restricted_security(uid),
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
        },
    }
