"""The kuberl chart rendered by the real `helm` binary (built by hack/cluster-bin.sh)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "charts" / "kuberl"
RELEASE = "kuberl"
NAMESPACE = "kuberl-system"


def job_manifest(name: str, namespace: str) -> dict[str, Any]:
    """A valid job to create with kubectl in the cluster tier.

    `rollout.n` is left out (with the micro batch cut to stay valid) until the CRD generator
    quotes the key `n`: Go's YAML reads the unquoted key as `false`, so kubectl rejects
    `rollout.n` as unknown (tests/charts/test_render.py::test_crd_keys_mean_the_same_...).
    """
    from support.manifests import valid_manifest

    manifest = valid_manifest()
    manifest["metadata"] = {"name": name, "namespace": namespace}
    roles = manifest["spec"]["backend_config"]["actor_rollout_ref"]
    del roles["rollout"]["n"]
    roles["actor"]["ppo_micro_batch_size_per_gpu"] = 1
    return manifest


def combinations(watch_namespaces: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The value sets every render test covers: defaults and each optional feature switched on."""
    namespaced = {"operator": {"watchNamespaces": list(watch_namespaces)}}
    monitors = {"metrics": {"serviceMonitor": {"enabled": True}, "podMonitor": {"enabled": True}}}
    dashboard = {"dashboard": {"enabled": True}}
    return {
        "default": {},
        "namespaced": namespaced,
        "metrics-on": monitors,
        "dashboard-on": dashboard,
        "everything": {**namespaced, **monitors, **dashboard},
    }


class Manifests(list[dict[str, Any]]):
    """The documents of one render, with lookups by kind."""

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [doc for doc in self if doc["kind"] == kind]

    def one(self, kind: str) -> dict[str, Any]:
        found = self.of_kind(kind)
        assert len(found) == 1, f"expected one {kind}, rendered {len(found)}"
        return found[0]

    def kinds(self) -> set[str]:
        return {doc["kind"] for doc in self}


class Helm:
    """Runs one helm binary with its cache, config and data kept inside `home`."""

    def __init__(
        self, binary: Path, home: Path, kube_version: str, kubeconfig: str | None = None
    ) -> None:
        self.binary = binary
        # Offline renders assume this API server version (the test cluster's), not helm's guess.
        self.kube_version = kube_version
        self.home = home
        self.kubeconfig = kubeconfig
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def with_kubeconfig(self, kubeconfig: str) -> Helm:
        return Helm(self.binary, self.home, self.kube_version, kubeconfig)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(self.binary), *args]
        if self.kubeconfig:
            argv.append(f"--kubeconfig={self.kubeconfig}")
        result = subprocess.run(argv, capture_output=True, text=True, env=self.env, timeout=180)
        if check:
            assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stderr}"
        return result

    def lint(self, values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        return self.run(
            "lint",
            "--strict",
            str(CHART_DIR),
            f"--kube-version={self.kube_version}",
            "--values",
            self.values_file(values),
            check=False,
        )

    def install(self, release: str, namespace: str, values: dict[str, Any] | None = None) -> str:
        """`helm install`; returns its output (NOTES.txt included). The release name must contain
        "kuberl" so that it is the full name of every object, the ServiceAccount included."""
        assert "kuberl" in release
        args = ["install", release, str(CHART_DIR), f"--namespace={namespace}"]
        return self.run(*args, "--values", self.values_file(values)).stdout

    def values_file(self, values: dict[str, Any] | None) -> str:
        path = self.home / f"values-{abs(hash(repr(values)))}.yaml"
        path.write_text(yaml.safe_dump(values or {}))
        return str(path)

    def template_text(
        self,
        values: dict[str, Any] | None = None,
        *,
        include_crds: bool = False,
        namespace: str = NAMESPACE,
        release: str = RELEASE,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        args = ["template", release, str(CHART_DIR), f"--namespace={namespace}"]
        args.append(f"--kube-version={self.kube_version}")
        args += ["--values", self.values_file(values)]
        if include_crds:
            args.append("--include-crds")
        return self.run(*args, check=check)

    def template(
        self,
        values: dict[str, Any] | None = None,
        *,
        include_crds: bool = False,
        namespace: str = NAMESPACE,
        release: str = RELEASE,
    ) -> Manifests:
        text = self.template_text(
            values, include_crds=include_crds, namespace=namespace, release=release
        ).stdout
        return Manifests(doc for doc in yaml.safe_load_all(text) if doc)


def resolve_helm(home: Path, kubeconfig: str | None = None) -> Helm:
    """The pinned helm (hack/versions.env) from the cluster toolchain; hack/ must be importable."""
    from testcluster.binaries import read_versions, resolve_binaries

    binary = resolve_binaries().helm
    assert binary.exists(), f"{binary} is not built; run `make cluster-bin`"
    return Helm(binary, home, read_versions()["KUBERNETES_VERSION"], kubeconfig)


def token_kubeconfig(admin_kubeconfig: str, account: str, namespace: str, path: Path) -> str:
    """A copy of the admin kubeconfig authenticating as a ServiceAccount instead, with a fresh
    bound token from the TokenRequest API (`kubectl create token`), as a pod would be."""
    from testcluster.binaries import resolve_binaries

    kubectl = [str(resolve_binaries().kubectl), f"--kubeconfig={admin_kubeconfig}"]
    token = subprocess.run(
        [*kubectl, "create", "token", account, f"--namespace={namespace}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    config = yaml.safe_load(Path(admin_kubeconfig).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return str(path)


@contextlib.contextmanager
def chart_operator_kubeconfig(
    admin_kubeconfig: str,
    home: Path,
    watch_namespaces: Sequence[str] = (),
    namespace: str | None = None,
) -> Iterator[str]:
    """Install the chart into its own namespace and yield a kubeconfig that authenticates as the
    chart's ServiceAccount: an operator run with it has exactly the chart's RBAC, nothing more.
    The release and its namespace are removed afterwards."""
    from testcluster.binaries import resolve_binaries

    suffix = uuid.uuid4().hex[:6]
    release, namespace = f"kuberl-{suffix}", namespace or f"kuberl-system-{suffix}"
    kubectl = [str(resolve_binaries().kubectl), f"--kubeconfig={admin_kubeconfig}"]
    subprocess.run([*kubectl, "create", "namespace", namespace], check=True, capture_output=True)
    helm = resolve_helm(home, admin_kubeconfig)
    values = {"operator": {"watchNamespaces": list(watch_namespaces)}}
    helm.install(release, namespace, values)
    try:
        yield token_kubeconfig(admin_kubeconfig, release, namespace, home / f"{release}.kubeconfig")
    finally:
        helm.run("uninstall", release, f"--namespace={namespace}")
        subprocess.run([*kubectl, "delete", "namespace", namespace, "--wait=false"], check=True)
