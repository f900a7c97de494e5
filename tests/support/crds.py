"""Wait for CustomResourceDefinitions to be Established by polling the objects themselves.

Not `kubectl wait --for=condition=Established`: right after a create or apply the CRD's status
may have no conditions yet, and kubectl then fails at once (".status.conditions accessor error:
<nil>") instead of waiting. On a loaded machine that window is wide enough to fail a run.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterable

from testcluster.probes import wait_until

Kubectl = Callable[..., str]


def established(kubectl: Kubectl, name: str) -> bool:
    """Is CRD `name` (plural.group, optionally prefixed crd/) served? False while it is absent."""
    name = name.removeprefix("crd/").removeprefix("customresourcedefinition/")
    try:
        raw = kubectl("get", "crd", name, "--ignore-not-found", "-o=json")
    except (AssertionError, subprocess.SubprocessError):
        return False
    if not raw.strip():
        return False
    conditions = (json.loads(raw).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def wait_established(kubectl: Kubectl, names: Iterable[str], timeout: float = 120) -> None:
    for name in names:
        wait_until(f"CRD {name} Established", lambda n=name: established(kubectl, n), None, timeout)


def names_in(path: str) -> list[str]:
    """The CRD names (plural.group) declared in a YAML file of one or more CRDs."""
    import yaml

    with open(path) as handle:
        docs = [d for d in yaml.safe_load_all(handle) if d]
    return [d["metadata"]["name"] for d in docs if d.get("kind") == "CustomResourceDefinition"]
