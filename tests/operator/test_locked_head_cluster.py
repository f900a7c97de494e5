"""On the real control plane: each job's head is locked (token auth + NetworkPolicy) and the
operator, holding only what the chart grants, still submits to and polls a head that refuses
any request without the token (the local Ray head runs RAY_AUTH_MODE=token)."""

import pytest

from support.rljobs import fake_job, wait_for

pytestmark = pytest.mark.cluster


def test_locked_head_job_runs_to_success(jobs, kube_api, ray_head, tmp_path):
    from kubernetes import client

    jobs.apply(fake_job("locked", tmp_path, "fake-steps-2-1"))
    [raycluster] = wait_for("RayCluster locked-a1", lambda: jobs.rayclusters())
    auth = raycluster["spec"]["authOptions"]
    # One Secret per job and token key: <job>-ray-token-<key id> (ray_auth.py, rotation).
    assert auth["mode"] == "token" and auth["secretName"].startswith("locked-ray-token-")
    core = client.CoreV1Api(kube_api)
    secret = core.read_namespaced_secret(auth["secretName"], jobs.namespace)
    assert set(secret.data) == {"auth_token"}
    assert secret.metadata.owner_references[0].kind == "RLTrainingJob"
    policy = client.NetworkingV1Api(kube_api).read_namespaced_network_policy(
        "locked-ray", jobs.namespace
    )
    assert policy.spec.pod_selector.match_labels == {"kuberl.io/job": "locked"}
    assert policy.spec.policy_types == ["Ingress"]
    status = jobs.wait_phase("locked", "Succeeded", timeout=150)
    assert status["progress"]["globalStep"] == 2
    # Nothing of the token reaches status or events.
    token = secret.data["auth_token"]
    events = core.list_namespaced_event(jobs.namespace).items
    assert token not in str(status) and all(token not in (e.message or "") for e in events)
