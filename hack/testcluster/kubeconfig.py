"""The admin kubeconfig every local client uses (tests, kubectl, kopf, helm, the components)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

CONTEXT = "kuberl-local"


def build_kubeconfig(server: str, ca_cert: Path, token: str) -> dict[str, object]:
    # The CA is embedded, not referenced by path, so a copied kubeconfig keeps working.
    ca_data = base64.b64encode(ca_cert.read_bytes()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": CONTEXT, "cluster": {"server": server, "certificate-authority-data": ca_data}}
        ],
        "users": [{"name": CONTEXT, "user": {"token": token}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": "default"},
            }
        ],
        "current-context": CONTEXT,
    }


def write_kubeconfig(path: Path, config: dict[str, object]) -> None:
    # JSON is valid YAML, and every Kubernetes client reads it.
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
