"""Where the operator reaches a hostNetwork job's Ray dashboard: the head pod's host IP and the
dashboard port allocated to its RayCluster (kuberl_operator.builders.hostnet)."""

from kuberl_api.job import RLTrainingJobSpec
from kuberl_operator.builders.hostnet import dashboard_address, ray_ports
from kuberl_operator.kube import Kube
from kuberl_operator.names import head_service_url


def head_ports(spec: RLTrainingJobSpec, namespace: str, cluster: str) -> dict[str, int] | None:
    """The head's Ray ports under hostNetwork (what status records); None on the pod network."""
    if spec.network != "hostNetwork":
        return None
    return ray_ports(namespace, cluster, len(spec.worker_pools))[0]


def host_network_dashboard(
    kube: Kube, spec: RLTrainingJobSpec, namespace: str, cluster: str
) -> str:
    """The head pod's host IP once it is scheduled; before that, the head Service on the
    allocated port (which cluster DNS resolves to the same address)."""
    ports = head_ports(spec, namespace, cluster)
    assert ports is not None, "only for spec.network: hostNetwork"
    pods = kube.list_pods(namespace, f"ray.io/cluster={cluster},ray.io/node-type=head")
    for pod in pods:
        if host_ip := (pod.get("status") or {}).get("hostIP"):
            return dashboard_address(host_ip, ports)
    return head_service_url(cluster, namespace, ports["dashboard-port"])
