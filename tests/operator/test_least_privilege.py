"""The converse of test_rbac.py: the operator is granted nothing it does not use. Every granted
(group, resource, verb) is accounted for by a call in kube.Kube, by kopf, or by the RBAC
escalation check (the operator must hold what it grants each job's runtime)."""

from kuberl_operator.builders.runtime_rbac import RUNTIME_RULES
from kuberl_operator.rbac import OPERATOR_RULES

KUBE_CALLS = {
    ("kuberl.io", "rltrainingjobs", "get"),
    ("kuberl.io", "rltrainingjobs", "delete"),
    ("kuberl.io", "rltrainingjobs/status", "patch"),
    ("ray.io", "rayclusters", "get"),
    ("ray.io", "rayclusters", "list"),
    ("ray.io", "rayclusters", "create"),
    ("ray.io", "rayclusters", "delete"),
    ("", "pods", "list"),
    # cached_kube.py: RayClusters and pods are listed once, then watched.
    ("ray.io", "rayclusters", "watch"),
    ("", "pods", "watch"),
    ("", "serviceaccounts", "create"),
    ("", "secrets", "create"),
    ("rbac.authorization.k8s.io", "roles", "create"),
    ("rbac.authorization.k8s.io", "rolebindings", "create"),
    ("networking.k8s.io", "networkpolicies", "create"),
    ("scheduling.volcano.sh", "podgroups", "create"),
    # ownerReferences with blockOwnerDeletion on the children.
    ("kuberl.io", "rltrainingjobs/finalizers", "update"),
}
KOPF = {
    ("kuberl.io", "rltrainingjobs", verb) for verb in ("list", "watch", "patch")
} | {
    ("", "events", "create"), ("", "events", "patch"),
    ("events.k8s.io", "events", "create"), ("events.k8s.io", "events", "patch"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "get"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
    ("", "namespaces", "get"), ("", "namespaces", "list"), ("", "namespaces", "watch"),
}  # fmt: skip
ESCALATION = {
    (group, resource, verb)
    for rule in RUNTIME_RULES
    for group in rule["apiGroups"]
    for resource in rule["resources"]
    for verb in rule["verbs"]
}


def granted() -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in OPERATOR_RULES
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_no_verb_is_granted_that_nothing_uses() -> None:
    unused = granted() - KUBE_CALLS - KOPF - ESCALATION
    assert not unused, f"granted but never used: {sorted(unused)}"


def test_the_operator_never_reads_secrets_or_writes_pods() -> None:
    assert not {v for g, r, v in granted() if r == "secrets"} - {"create"}
    assert not {(g, r) for g, r, _ in granted() if r in ("pods/exec", "pods/portforward")}
    assert not {v for g, r, v in granted() if r == "pods"} - {"list", "watch"}  # reads only
