"""Pods on the real node: images from images/ really run, as non-root on a read-only root
filesystem, `kubectl logs` reaches the kubelet, and pods that do not ask stay on kwok."""

from __future__ import annotations

import json
from typing import Any

import pytest

from realpods.pods import real_pod
from support.rljobs import wait_for

pytestmark = pytest.mark.realpods

OPERATOR_IMAGE = "kuberl.local/operator:0.1.0"
PROBE = (
    "import os, pathlib, socket\n"
    "print('uid', os.getuid(), 'host', socket.gethostname())\n"
    "try:\n"
    "    pathlib.Path('/probe').write_text('x')\n"
    "    print('rootfs writable')\n"
    "except OSError as err:\n"
    "    print('rootfs read-only', err.errno)\n"
    "pathlib.Path('/tmp/probe').write_text('x')\n"
    "print('tmp writable')\n"
    "import kuberl_operator\n"
    "print('kuberl_operator', kuberl_operator.__name__)\n"
)


def pod_json(kubectl: Any, namespace: str, name: str) -> dict:
    return json.loads(kubectl("get", "pod", name, "-n", namespace, "-o", "json"))


def test_operator_image_runs_as_non_root_on_read_only_rootfs(real_node, kubectl, namespace):
    pod = real_pod("probe", OPERATOR_IMAGE, ["python", "-c", PROBE], uid=65532)
    kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    phase = wait_for(
        "the probe pod to finish",
        lambda: (
            pod_json(kubectl, namespace, "probe")["status"].get("phase") in ("Succeeded", "Failed")
            and pod_json(kubectl, namespace, "probe")["status"]["phase"]
        ),
        timeout=120,
    )
    logs = kubectl("logs", "probe", "-n", namespace)
    assert phase == "Succeeded", logs
    status = pod_json(kubectl, namespace, "probe")["status"]
    # A real container (containerd's ID), on the real node, not a kwok fake.
    assert status["hostIP"] == real_node.address
    assert status["containerStatuses"][0]["containerID"].startswith("containerd://")
    assert "uid 65532" in logs
    assert "rootfs read-only 30" in logs  # EROFS
    assert "tmp writable" in logs and "kuberl_operator kuberl_operator" in logs


def test_pods_that_do_not_ask_stay_on_kwok(real_node, kubectl, namespace):
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "main", "image": "kuberl.local/not-imported:1"}]},
    }
    kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
    node = wait_for(
        "the plain pod to be scheduled",
        lambda: pod_json(kubectl, namespace, "plain")["spec"].get("nodeName"),
    )
    assert node != real_node.address
    labels = json.loads(kubectl("get", "node", node, "-o", "json"))["metadata"]["annotations"]
    assert labels.get("kwok.x-k8s.io/node") == "fake"


def test_restricted_pod_security_admits_all_but_host_network(real_node, kubectl, namespace):
    """The real-node pods meet `restricted` in everything but hostNetwork, which no Pod Security
    level above privileged admits (there is no pod-IP CNI here; see hack/README.md)."""
    kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    pod = real_pod("checked", OPERATOR_IMAGE, ["true"], uid=65532)
    refused = kubectl(
        "create",
        "--dry-run=server",
        "-n",
        namespace,
        "-f",
        "-",
        stdin=json.dumps(pod),
        check=False,
    )
    assert "violates PodSecurity" in refused and "hostNetwork" in refused
    del pod["spec"]["hostNetwork"]
    kubectl("create", "--dry-run=server", "-n", namespace, "-f", "-", stdin=json.dumps(pod))
