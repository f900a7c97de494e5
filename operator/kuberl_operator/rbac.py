"""Every permission the operator needs, as Kubernetes PolicyRules: the one list the Helm chart's
ClusterRole is rendered from (and checked against).

Each rule says why it exists; a new API call in the operator needs a rule here first.
"""

from kuberl_api.job import GROUP, PLURAL
from kuberl_operator.builders.runtime_rbac import RUNTIME_RULES

OPERATOR_RULES: list[dict[str, list[str]]] = [
    # Watch jobs, delete them after ttlSecondsAfterFinished, keep kopf's finalizer/annotations.
    {
        "apiGroups": [GROUP],
        "resources": [PLURAL],
        "verbs": ["get", "list", "watch", "patch", "update", "delete"],
    },
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["get", "patch", "update"]},
    # Setting blockOwnerDeletion on children needs update on the owner's finalizers.
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/finalizers"], "verbs": ["update"]},
    # One RayCluster per attempt.
    {
        "apiGroups": ["ray.io"],
        "resources": ["rayclusters"],
        "verbs": ["get", "list", "watch", "create", "delete"],
    },
    {"apiGroups": ["ray.io"], "resources": ["rayclusters/status"], "verbs": ["get"]},
    # Why a cluster is not ready: unschedulable pods, image pull failures.
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    # The runtime's per-job identity.
    {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "create"]},
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "rolebindings"],
        "verbs": ["get", "create"],
    },
    # Volcano's gang of each attempt when a pool is scheduled by Volcano (gang.py).
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": ["create"]},
    # Granting a Role requires holding its permissions (RBAC escalation check).
    *RUNTIME_RULES,
    # Events for every transition (kopf posts core/v1 events).
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    # kopf: resource discovery, and namespaces when watching all of them.
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
]


def verbs_for(group: str, resource: str) -> set[str]:
    """Verbs granted on ``group``/``resource``: what a test checks each API call against."""
    return {
        verb
        for rule in OPERATOR_RULES
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }
