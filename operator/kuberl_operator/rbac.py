"""Every permission the operator needs, as Kubernetes PolicyRules: the one list the Helm chart's
ClusterRole is rendered from (and checked against).

Each rule says why it exists; a new API call in the operator needs a rule here first.
"""

from kuberl_api.job import GROUP, PLURAL
from kuberl_operator.builders.runtime_rbac import RUNTIME_RULES

OPERATOR_RULES: list[dict[str, list[str]]] = [
    # Watch jobs (kopf: list/watch, patch for its finalizer), read one, delete after the TTL.
    {
        "apiGroups": [GROUP],
        "resources": [PLURAL],
        "verbs": ["get", "list", "watch", "patch", "delete"],
    },
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["patch"]},
    # Setting blockOwnerDeletion on children needs update on the owner's finalizers.
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/finalizers"], "verbs": ["update"]},
    # One RayCluster per attempt. Creating one lets KubeRay create pods for it: see the chart
    # README for what that amounts to.
    {
        "apiGroups": ["ray.io"],
        "resources": ["rayclusters"],
        "verbs": ["get", "list", "watch", "create", "delete"],
    },
    # Why a cluster is not ready: unschedulable pods, image pull failures. RayClusters and pods
    # are listed once and then watched, label-selected on kuberl.io/job (cached_kube.py).
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    # The runtime's per-job identity, and the head's token (created, never read back: the
    # operator derives the token again, see ray_auth.py).
    {"apiGroups": [""], "resources": ["serviceaccounts", "secrets"], "verbs": ["create"]},
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "rolebindings"],
        "verbs": ["create"],
    },
    # The NetworkPolicy in front of each job's pods.
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["create"]},
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

# Leader election (leader.py): the one Lease every operator of a release takes before acting,
# granted by a Role in the release's own namespace only (never cluster-wide: update on every
# Lease would let the operator take over kube-scheduler's or kube-controller-manager's).
LEADER_ELECTION_RULES: list[dict[str, list[str]]] = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update"],
    },
]


def verbs_for(group: str, resource: str) -> set[str]:
    """Verbs granted on ``group``/``resource``: what a test checks each API call against."""
    return {
        verb
        for rule in OPERATOR_RULES
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }
