"""Job names KubeRay would reject are refused when the job is applied (the CRD's CEL rule on
metadata.name), and every name derived from an accepted one fits its own limit."""

import re
from typing import Any

import pytest

from kuberl_api.job import GROUP, PLURAL, VERSION
from kuberl_operator.names import (
    network_policy_name,
    ray_token_secret_name,
    raycluster_name,
    runtime_account_name,
    submission_id,
)
from support.manifests import valid_manifest, with_changes

DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LONGEST = "a" + "b" * 61 + "c"  # 63 characters
# KubeRay names the head Service <cluster>-head-svc and pods <cluster>-<group>-worker-<5>; it
# rejects cluster names over 53 characters (ValidateRayClusterMetadata).
KUBERAY_CLUSTER_LIMIT = 53


@pytest.mark.parametrize("attempt", [1, 9, 10, 999])
def test_every_derived_name_of_the_longest_name_fits(attempt: int) -> None:
    cluster = raycluster_name(LONGEST, attempt)
    assert DNS_1035.match(cluster) and len(cluster) <= KUBERAY_CLUSTER_LIMIT
    assert len(cluster + "-head-svc") <= 63
    for name in (runtime_account_name(LONGEST), ray_token_secret_name(LONGEST),
                 network_policy_name(LONGEST), submission_id(LONGEST, attempt)):  # fmt: skip
        assert len(name) <= 253 and DNS_1035.match(name)


def _create(kube_api: Any, namespace: str, name: str) -> Any:
    from kubernetes import client

    body = with_changes(valid_manifest(), {"metadata.name": name})
    body["metadata"]["namespace"] = namespace
    return client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body
    )


@pytest.mark.cluster
@pytest.mark.parametrize("name", ["my.job", "1st-run", LONGEST + "d", "ends-with-"])
def test_names_kuberay_would_reject_are_refused_at_apply(kube_api, job_namespace, name):
    from kubernetes.client.exceptions import ApiException

    with pytest.raises(ApiException) as refused:
        _create(kube_api, job_namespace, name)
    assert refused.value.status == 422
    assert "DNS-1035 label of at most 63 characters" in refused.value.body


@pytest.mark.cluster
def test_the_longest_valid_name_is_accepted(kube_api, job_namespace):
    assert _create(kube_api, job_namespace, LONGEST)["metadata"]["name"] == LONGEST


@pytest.mark.parametrize("attempt", [1, 10])
def test_a_name_spelled_like_a_shortened_twin_gets_its_own_cluster(attempt: int) -> None:
    twin = raycluster_name(LONGEST, attempt).removesuffix(f"-a{attempt}")
    assert raycluster_name(twin, attempt) != raycluster_name(LONGEST, attempt)
    for derive in (runtime_account_name, ray_token_secret_name, network_policy_name):
        assert derive(twin) != derive(LONGEST)


def test_no_two_names_share_a_cluster_among_many_near_twins() -> None:
    names = [LONGEST[: 63 - len(str(i))] + str(i) for i in range(2000)]
    names += [raycluster_name(n, 1).removesuffix("-a1") for n in names[:200]]
    names += ["a" * length for length in range(1, 64)]
    clusters = {raycluster_name(n, 1) for n in names}
    assert len(clusters) == len(set(names))
