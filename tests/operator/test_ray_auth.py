"""Every head is locked: token auth on the RayCluster, the job's own token Secret, the token
sent on every Jobs API call, and a NetworkPolicy in front of the job's pods."""

from typing import Any

import pytest

from kuberl_operator.builders import JobRef
from kuberl_operator.builders.network import TOKEN_KEY, build_network_policy
from kuberl_operator.config import OperatorConfig
from kuberl_operator.ray_auth import RayAuth, RayAuthError, derive_token

KEY = b"k" * 32


@pytest.fixture
def config(tmp_path: Any) -> OperatorConfig:
    key = tmp_path / "key"
    key.write_bytes(KEY + b"\n")
    return OperatorConfig(backoff_base=10, backoff_max=60, ray_token_key_file=str(key))


@pytest.fixture
def keyed(harness: Any) -> Any:
    return harness


def _created(harness: Any, kind: str) -> list[dict[str, Any]]:
    return [obj for obj in harness.kube.objects if obj["kind"] == kind]


def test_tokens_are_per_job_and_stable() -> None:
    a = JobRef("grpo", "team-a", "uid-1")
    assert derive_token(KEY, a) == derive_token(KEY, JobRef("grpo", "team-a", "uid-1"))
    assert derive_token(KEY, a) != derive_token(KEY, JobRef("grpo", "team-a", "uid-2"))
    assert derive_token(KEY, a) != derive_token(KEY, JobRef("grpo", "team-b", "uid-1"))
    assert derive_token(KEY, a) != derive_token(b"o" * 32, a)
    with pytest.raises(RayAuthError, match="32"):
        RayAuth(b"short")


def test_the_cluster_runs_token_auth_with_the_jobs_secret(keyed: Any) -> None:
    keyed.reconcile()
    (cluster,) = keyed.kube.rayclusters.values()
    (secret,) = _created(keyed, "Secret")
    assert cluster["spec"]["authOptions"] == {
        "mode": "token",
        "secretName": secret["metadata"]["name"],
    }
    ref = JobRef(keyed.name, "team-a", keyed.job["metadata"]["uid"])
    assert secret["stringData"] == {TOKEN_KEY: derive_token(KEY, ref)}
    assert secret["metadata"]["ownerReferences"][0]["uid"] == ref.uid


def test_the_operator_sends_the_jobs_token_on_every_call(keyed: Any) -> None:
    keyed.run_until_running()
    ref = JobRef(keyed.name, "team-a", keyed.job["metadata"]["uid"])
    assert keyed.ray.tokens == {derive_token(KEY, ref)}
    # A restarted operator with the same key derives the same token.
    keyed.reconciler = keyed.new_reconciler()
    keyed.reconcile()
    assert keyed.ray.tokens == {derive_token(KEY, ref)}


def test_a_shared_test_head_token_is_sent_but_never_stored(keyed: Any, tmp_path: Any) -> None:
    (tmp_path / "shared").write_text("shared-token\n")
    auth = RayAuth(KEY, "shared-token")
    ref = JobRef("grpo", "team-a", "u")
    assert auth.token_for(ref) == "shared-token"
    assert auth.secret_token(ref) == derive_token(KEY, ref)
    loaded = RayAuth.load(str(tmp_path / "key"), str(tmp_path / "shared"))
    assert loaded.token_for(ref) == "shared-token"


def test_network_policy_admits_the_jobs_pods_and_the_operator_only() -> None:
    policy = build_network_policy(JobRef("grpo", "team-a", "u"), "kuberl-system")
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {"kuberl.io/job": "grpo"}}
    assert spec["policyTypes"] == ["Ingress"]
    own, operator, metrics = spec["ingress"]
    assert own == {"from": [{"podSelector": {"matchLabels": {"kuberl.io/job": "grpo"}}}]}
    assert operator["ports"] == [{"protocol": "TCP", "port": 8265}]
    (peer,) = operator["from"]
    assert peer["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "kuberl-system"}
    }
    assert peer["podSelector"] == {"matchLabels": {"app.kubernetes.io/component": "operator"}}
    assert "from" not in metrics
    assert {p["port"] for p in metrics["ports"]} == {8080, 8090}  # scrapes only
    assert 6379 not in {p["port"] for rule in spec["ingress"] for p in rule.get("ports", [])}


def test_the_job_gets_its_network_policy(keyed: Any) -> None:
    keyed.reconcile()
    (policy,) = _created(keyed, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"] == {"kuberl.io/job": keyed.name}


def test_the_local_head_refuses_requests_without_its_token(ray_head: dict[str, Any]) -> None:
    """The real Ray 2.60 head the cluster tier uses runs RAY_AUTH_MODE=token, like the pods."""
    from kuberl_operator.ray_jobs import DashboardUnavailable, RayJobsClient

    for token in (None, "wrong-token"):
        with pytest.raises(DashboardUnavailable, match="refused the operator's token"):
            RayJobsClient(ray_head["url"], token=token, timeout=5).session_name()
    assert ray_head["client"].session_name().startswith("session_")
