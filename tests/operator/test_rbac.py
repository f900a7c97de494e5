"""The operator's RBAC rule list: well-formed, and covering every call kube.Kube makes."""

import ast
import inspect

from kuberl_operator import kube
from kuberl_operator.builders.runtime_rbac import RUNTIME_RULES
from kuberl_operator.rbac import OPERATOR_RULES, verbs_for

# kube.Kube's client methods → (API group, resource, verb).
CALLS = {
    "get_namespaced_custom_object": [("kuberl.io", "rltrainingjobs", "get"),
                                     ("ray.io", "rayclusters", "get")],
    "patch_namespaced_custom_object_status": [("kuberl.io", "rltrainingjobs/status", "patch")],
    "delete_namespaced_custom_object": [("kuberl.io", "rltrainingjobs", "delete"),
                                        ("ray.io", "rayclusters", "delete")],
    "list_namespaced_custom_object": [("ray.io", "rayclusters", "list")],
    "create_namespaced_custom_object": [("ray.io", "rayclusters", "create")],
    "list_namespaced_pod": [("", "pods", "list")],
    "create_namespaced_service_account": [("", "serviceaccounts", "create")],
    "create_namespaced_role": [("rbac.authorization.k8s.io", "roles", "create")],
    "create_namespaced_role_binding": [("rbac.authorization.k8s.io", "rolebindings", "create")],
    "create_namespaced_secret": [("", "secrets", "create")],
    "create_namespaced_network_policy": [("networking.k8s.io", "networkpolicies", "create")],
}  # fmt: skip


def test_rules_are_policy_rules():
    for rule in OPERATOR_RULES:
        assert set(rule) == {"apiGroups", "resources", "verbs"}
        assert all(isinstance(v, list) and v for v in rule.values())


def test_every_client_call_in_kube_has_a_rule():
    tree = ast.parse(inspect.getsource(kube))
    called = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and "namespaced" in node.func.attr
    }
    assert called == set(CALLS), "a new API call needs an entry here and a rule in rbac.py"
    for calls in CALLS.values():
        for group, resource, verb in calls:
            assert verb in verbs_for(group, resource), (group, resource, verb)


def test_every_informer_may_list_and_watch_what_it_keeps():
    """cached_kube.py keeps RayClusters, pods and jobs by list-then-watch, cluster-wide or per
    namespace: each needs list and watch."""
    import functools

    from kubernetes import client

    from kuberl_operator.cached_kube import CachedKube

    resources = {"pods": ("", "pods"), "rayclusters": ("ray.io", "rayclusters"),
                 "jobs": ("kuberl.io", "rltrainingjobs")}  # fmt: skip
    for namespaces in ((), ("team-a",)):
        kube = CachedKube(client.ApiClient(), namespaces)
        kept = {what for what, _ in kube._informers}
        assert kept == set(resources)
        for (what, _), informer in kube._informers.items():
            lister = informer.lister
            while isinstance(lister, functools.partial):
                lister = lister.func
            assert lister.__name__.startswith("list_"), lister
            assert {"list", "watch"} <= verbs_for(*resources[what]), what


def test_kopf_needs_are_covered():
    assert {"list", "watch", "patch"} <= verbs_for("kuberl.io", "rltrainingjobs")
    assert {"list", "watch"} <= verbs_for("apiextensions.k8s.io", "customresourcedefinitions")
    assert {"create"} <= verbs_for("", "events")


def test_operator_holds_what_it_grants_the_runtime():
    for rule in RUNTIME_RULES:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert set(rule["verbs"]) <= verbs_for(group, resource)
