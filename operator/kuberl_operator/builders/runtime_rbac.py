"""The runtime's identity: a per-job ServiceAccount that may patch only its own job's status."""

from typing import Any

from kuberl_api.job import GROUP, PLURAL
from kuberl_operator.builders.common import JobRef
from kuberl_operator.names import runtime_account_name

RUNTIME_RULES = [
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["get", "patch"]}
]


def build_runtime_rbac(job: JobRef) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding, all named ``<job>-runtime`` and owned by the job."""
    name = runtime_account_name(job.name)
    rules = [{**rule, "resourceNames": [job.name]} for rule in RUNTIME_RULES]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": job.metadata(name)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": job.metadata(name),
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": job.metadata(name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": job.namespace}],
        },
    ]
