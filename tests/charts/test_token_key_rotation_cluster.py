"""The chart's Ray token key on the real API server: kept by an upgrade, rotated by a new
`rayTokenKey.rotation` (the replaced key kept as `previous`, the operator pod restarted), and
kept across `helm uninstall` / `helm install` (docs/security.md, key rotation)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cluster.conftest import kubectl  # noqa: F401

from support.helm import CHART_DIR, Helm

pytestmark = pytest.mark.cluster
Kubectl = Callable[..., str]


@pytest.fixture
def operator_namespace(kubectl: Kubectl) -> Iterator[str]:  # noqa: F811
    name = f"chart-key-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl("delete", "namespace", name, "--wait=false")


def _key_secret(kubectl: Kubectl, release: str, namespace: str) -> dict[str, Any]:  # noqa: F811
    text = kubectl("get", "secret", f"{release}-ray-token-key", f"--namespace={namespace}",
                   "-o=json")  # fmt: skip
    secret = json.loads(text)
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    return {"data": data, "annotations": secret["metadata"].get("annotations") or {}}


def _pod_rotation(kubectl: Kubectl, release: str, namespace: str) -> str:  # noqa: F811
    path = "-o=jsonpath={.spec.template.metadata.annotations.kuberl\\.io/ray-token-rotation}"
    return kubectl("get", "deployment", release, f"--namespace={namespace}", path)


def test_the_key_survives_upgrades_and_reinstalls_and_rotates_on_request(
    helm: Helm,
    local_cluster: Any,
    kubectl: Kubectl,  # noqa: F811
    operator_namespace: str,
) -> None:
    chart = helm.with_kubeconfig(local_cluster.kubeconfig)
    release, ns = f"kuberl-{uuid.uuid4().hex[:6]}", operator_namespace

    def upgrade(rotation: str) -> None:
        values = chart.values_file({"rayTokenKey": {"rotation": rotation}})
        chart.run("upgrade", release, str(CHART_DIR), f"--namespace={ns}", "--skip-crds",
                  "--values", values)  # fmt: skip

    # Only the key matters here: the CRD is left as the session installed it.
    chart.run("install", release, str(CHART_DIR), f"--namespace={ns}", "--skip-crds")
    first = _key_secret(kubectl, release, ns)
    assert len(first["data"]["key"]) == 64 and first["data"]["previous"] == ""
    assert first["annotations"]["helm.sh/resource-policy"] == "keep"

    upgrade("")
    assert _key_secret(kubectl, release, ns)["data"] == first["data"]  # an upgrade keeps it

    upgrade("2026-11-28")
    rotated = _key_secret(kubectl, release, ns)
    assert rotated["data"]["key"] != first["data"]["key"]
    assert rotated["data"]["previous"] == first["data"]["key"]
    assert _pod_rotation(kubectl, release, ns) == "2026-11-28"  # the operator pod is replaced
    upgrade("2026-11-28")
    assert _key_secret(kubectl, release, ns)["data"] == rotated["data"]  # rotated once only

    chart.run("uninstall", release, f"--namespace={ns}")
    assert _key_secret(kubectl, release, ns)["data"] == rotated["data"]  # kept by uninstall
    values = chart.values_file({"rayTokenKey": {"rotation": "2026-11-28"}})
    chart.run("install", release, str(CHART_DIR), f"--namespace={ns}", "--skip-crds",
              "--values", values)  # fmt: skip
    assert _key_secret(kubectl, release, ns)["data"] == rotated["data"]  # and reused
    chart.run("uninstall", release, f"--namespace={ns}")
