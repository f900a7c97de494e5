"""``spec.network: hostNetwork``: Ray pods on the node's network, each RayCluster on its own ports.

With host networking every Ray process binds a port of the node itself, so two RayClusters (or a
head and a worker of one) on the same node must not share any. Each RayCluster gets a block of
ports from its namespace/name (stable across reconciles, no allocation table to keep), one slot per
pod group: the head's slot holds GCS, dashboard and client ports, every slot holds the node's own
Ray ports, the runtime's metrics port and a range for Ray worker processes. Every port is declared
as a containerPort; with hostNetwork that is a hostPort, so the scheduler never places two pods
that would share one on the same node (two clusters whose blocks overlap wait for room instead
of cross-talking). Ray binds the node's address (``status.hostIP``); the operator reaches the
dashboard at the head pod's host IP and the allocated port (``dashboard_address``).
"""

from __future__ import annotations

import hashlib
from typing import Any

# Below Kubernetes' default NodePort range (30000-32767), so no Service's nodePort can take one,
# and so below Linux's default ephemeral range (32768-60999): no outgoing connection holds one.
PORT_RANGE = (20000, 29999)
NODE_PORT_RANGE = (30000, 32767)
NODE_PORTS = (
    "node-manager-port",
    "object-manager-port",
    "metrics-export-port",
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "runtime-env-agent-port",
)
HEAD_PORTS = ("port", "dashboard-port", "ray-client-server-port")
RUNTIME_METRICS = "runtime-metrics"
WORKER_PROCESS_PORTS = 20  # Ray's --min/max-worker-port range per pod
SLOT = len(NODE_PORTS) + len(HEAD_PORTS) + 1 + WORKER_PROCESS_PORTS
NODE_IP_ENV = "KUBERL_NODE_IP"
# Kubernetes-style short names for the containerPorts (at most 15 characters).
_PORT_NAMES = {
    "port": "gcs-server",
    "dashboard-port": "dashboard",
    "ray-client-server-port": "client",
    "node-manager-port": "node-manager",
    "object-manager-port": "object-manager",
    "metrics-export-port": "metrics",
    "dashboard-agent-listen-port": "agent-http",
    "dashboard-agent-grpc-port": "agent-grpc",
    "runtime-env-agent-port": "runtime-env",
    RUNTIME_METRICS: "runtime-metrics",
}


def ray_ports(namespace: str, cluster: str, groups: int) -> list[dict[str, int]]:
    """The ports of each pod group: [head, worker group 1, ...]. Worker-process ranges are
    ``min-worker-port``/``max-worker-port``."""
    low, high = PORT_RANGE
    blocks = (high - low + 1 - SLOT * (groups + 1)) // SLOT
    digest = int(hashlib.sha256(f"{namespace}/{cluster}".encode()).hexdigest(), 16)
    base = low + (digest % blocks) * SLOT
    result = []
    for group in range(groups + 1):
        start = base + group * SLOT
        names = (HEAD_PORTS if group == 0 else ()) + NODE_PORTS + (RUNTIME_METRICS,)
        ports = {name: start + offset for offset, name in enumerate(names)}
        first_worker = start + len(HEAD_PORTS) + len(NODE_PORTS) + 1
        ports["min-worker-port"] = first_worker
        ports["max-worker-port"] = first_worker + WORKER_PROCESS_PORTS - 1
        result.append(ports)
    return result


def apply_host_network(raycluster: dict[str, Any]) -> dict[str, int]:
    """Turn a built RayCluster's pods to host networking, in place; returns the head's ports
    (what status records)."""
    metadata = raycluster["metadata"]
    groups = raycluster["spec"]["workerGroupSpecs"]
    ports = ray_ports(metadata["namespace"], metadata["name"], len(groups))
    head = raycluster["spec"]["headGroupSpec"]
    _host_network_group(head, ports[0], head=True)
    for group, group_ports in zip(groups, ports[1:], strict=True):
        _host_network_group(group, group_ports, head=False)
    return ports[0]


def dashboard_address(host_ip: str, head_ports: dict[str, int]) -> str:
    return f"http://{host_ip}:{head_ports['dashboard-port']}"


def _host_network_group(group: dict[str, Any], ports: dict[str, int], head: bool) -> None:
    pod = group["template"]["spec"]
    pod["hostNetwork"] = True
    # Cluster DNS names (the head Service) must still resolve from the node's network.
    pod["dnsPolicy"] = "ClusterFirstWithHostNet"
    params = group["rayStartParams"]
    params.update({name: str(port) for name, port in ports.items() if name != RUNTIME_METRICS})
    params["node-ip-address"] = f"${NODE_IP_ENV}"
    if head:
        params["dashboard-host"] = f"${NODE_IP_ENV}"
    container = pod["containers"][0]
    container["ports"] = [
        {"name": _PORT_NAMES[name], "containerPort": port}
        for name, port in ports.items()
        if name in _PORT_NAMES
    ] + [
        {"name": f"ray-worker-{index}", "containerPort": port}
        for index, port in enumerate(range(ports["min-worker-port"], ports["max-worker-port"] + 1))
    ]
    env = [var for var in container["env"] if var["name"] != "KUBERL_METRICS_PORT"]
    env += [
        {"name": "KUBERL_METRICS_PORT", "value": str(ports[RUNTIME_METRICS])},
        {"name": NODE_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
    ]
    if head:
        # Ray maps a loopback node address to the host's routed IP unless this is 0; with a
        # real host IP it changes nothing (a loopback-only node is the local test cluster).
        # Never on workers: Ray 2.60 then refuses to join a cluster at all.
        env.append({"name": "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "value": "0"})
    container["env"] = env
