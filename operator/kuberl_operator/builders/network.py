"""What guards a job's Ray head: its token Secret and the NetworkPolicy in front of its pods.

The NetworkPolicy selects every pod of the job. Its pods reach one another on any port (GCS,
object store, NCCL); the operator reaches the dashboard (Jobs API) only; the metrics ports are
open to any pod (Prometheus), nothing else is. Both objects are owned by the job.
"""

from typing import Any

from kuberl_operator.builders.common import JobRef
from kuberl_operator.names import LABEL_JOB, network_policy_name, ray_token_secret_name

TOKEN_KEY = "auth_token"  # the key KubeRay's authOptions reads (RAY_AUTH_TOKEN_SECRET_KEY)
DASHBOARD_PORT = 8265
METRICS_PORTS = (8080, 8090)  # Ray's metrics export, the runtime's training metrics
# The chart's operator pod carries this label (kuberl.selectorLabels).
OPERATOR_POD_LABELS = {"app.kubernetes.io/component": "operator"}


def build_token_secret(job: JobRef, token: str, key_id: str | None = None) -> dict[str, Any]:
    """The job's token from the key ``key_id``: one Secret per key, so a rotation never
    changes the token a running cluster holds (ray_auth.py)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": job.metadata(ray_token_secret_name(job.name, key_id)),
        "stringData": {TOKEN_KEY: token},
    }


def auth_options(job: JobRef, key_id: str | None = None) -> dict[str, Any]:
    """RayCluster ``spec.authOptions``: token mode with the job's Secret (KubeRay >= 1.6)."""
    return {"mode": "token", "secretName": ray_token_secret_name(job.name, key_id)}


def build_network_policy(job: JobRef, operator_namespace: str | None) -> dict[str, Any]:
    """Without ``operator_namespace`` the operator's pod is looked for in the job's namespace."""
    own_pods = {"podSelector": {"matchLabels": {LABEL_JOB: job.name}}}
    operator_peer: dict[str, Any] = {"podSelector": {"matchLabels": dict(OPERATOR_POD_LABELS)}}
    if operator_namespace:
        selector = {"kubernetes.io/metadata.name": operator_namespace}
        operator_peer["namespaceSelector"] = {"matchLabels": selector}
    tcp = [{"protocol": "TCP", "port": port} for port in METRICS_PORTS]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": job.metadata(network_policy_name(job.name)),
        "spec": {
            "podSelector": {"matchLabels": {LABEL_JOB: job.name}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [own_pods]},
                {"from": [operator_peer], "ports": [{"protocol": "TCP", "port": DASHBOARD_PORT}]},
                {"ports": tcp},
            ],
        },
    }
