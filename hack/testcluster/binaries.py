"""Where hack/cluster-bin.sh put the control plane's binaries, resolved from hack/versions.env."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HACK_DIR = Path(__file__).resolve().parent.parent
VERSIONS_FILE = HACK_DIR / "versions.env"


class BinariesMissingError(RuntimeError):
    """The cache lacks a binary; the message says which and how to build it."""


def read_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """Parse the KEY=VALUE lines of versions.env (the same file cluster-bin.sh sources)."""
    versions: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            versions[key.strip()] = value.strip()
    return versions


def cache_root() -> Path:
    """As cluster-bin.sh: $KUBERL_CACHE_DIR, else $XDG_CACHE_HOME/kuberl, else ~/.cache/kuberl."""
    if explicit := os.environ.get("KUBERL_CACHE_DIR"):
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kuberl"


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of everything localcluster runs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    kwok: Path
    kwok_stages: Path
    ray_operator: Path
    kuberay_crds: Path
    helm: Path
    kueue: Path
    kueue_crds: Path

    def missing(self) -> list[Path]:
        return [path for path in vars(self).values() if not path.exists()]


def resolve_binaries(root: Path | None = None) -> Binaries:
    versions = read_versions()
    bin_root = (root or cache_root()) / "bin"
    kubernetes = bin_root / f"kubernetes-{versions['KUBERNETES_VERSION']}"
    kwok = bin_root / f"kwok-{versions['KWOK_VERSION']}"
    kuberay = bin_root / f"kuberay-{versions['KUBERAY_VERSION']}"
    return Binaries(
        etcd=bin_root / f"etcd-{versions['ETCD_VERSION']}" / "etcd",
        kube_apiserver=kubernetes / "kube-apiserver",
        kube_controller_manager=kubernetes / "kube-controller-manager",
        kube_scheduler=kubernetes / "kube-scheduler",
        kubectl=kubernetes / "kubectl",
        kwok=kwok / "kwok",
        kwok_stages=kwok / "stages",
        ray_operator=kuberay / "ray-operator",
        kuberay_crds=kuberay / "crds",
        helm=bin_root / f"helm-{versions['HELM_VERSION']}" / "helm",
        kueue=bin_root / f"kueue-{versions['KUEUE_VERSION']}" / "kueue",
        kueue_crds=bin_root / f"kueue-{versions['KUEUE_VERSION']}" / "crds",
    )


def require_binaries(root: Path | None = None) -> Binaries:
    """Resolve the binaries or fail with the command that builds them."""
    binaries = resolve_binaries(root)
    if missing := binaries.missing():
        listed = "\n  ".join(str(path) for path in missing)
        raise BinariesMissingError(
            f"the local control plane's binaries are not built:\n  {listed}\n"
            "run `make cluster-bin` (hack/cluster-bin.sh; needs Go and the Go module proxy)"
        )
    return binaries
