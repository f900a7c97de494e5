"""Turn hack/nodepools.yaml into kwok-managed Node manifests (pure: file in, dicts out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from testcluster.binaries import HACK_DIR
from testcluster.components import KWOK_NODE_ANNOTATION

NODEPOOLS_FILE = HACK_DIR / "nodepools.yaml"
POOL_LABEL = "kuberl.io/pool"


@dataclass(frozen=True)
class NodePool:
    name: str
    count: int
    capacity: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)

    def node_names(self) -> list[str]:
        return [f"{self.name}-{index}" for index in range(self.count)]


def load_nodepools(path: Path = NODEPOOLS_FILE) -> list[NodePool]:
    raw = yaml.safe_load(path.read_text())
    pools = []
    for entry in raw["pools"]:
        unknown = set(entry) - set(NodePool.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"{path}: pool {entry.get('name')!r} has unknown keys {sorted(unknown)}"
            )
        pools.append(
            NodePool(
                name=entry["name"],
                count=int(entry["count"]),
                capacity={key: str(value) for key, value in entry["capacity"].items()},
                labels={key: str(value) for key, value in (entry.get("labels") or {}).items()},
                taints=list(entry.get("taints") or []),
            )
        )
    return pools


def build_node(pool: NodePool, name: str) -> dict[str, object]:
    annotation_key, _, annotation_value = KWOK_NODE_ANNOTATION.partition("=")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {annotation_key: annotation_value},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                POOL_LABEL: pool.name,
                **pool.labels,
            },
        },
        "spec": {"taints": pool.taints},
        # kwok fills in conditions, addresses and heartbeats; capacity is ours to declare.
        "status": {"capacity": pool.capacity, "allocatable": pool.capacity},
    }


def build_nodes(pools: list[NodePool]) -> list[dict[str, object]]:
    return [build_node(pool, name) for pool in pools for name in pool.node_names()]
