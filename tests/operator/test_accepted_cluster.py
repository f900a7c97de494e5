"""On the real API server: `kubectl describe rlj` of a job applied with a key kuberl accepts
without effect, and a warning, shows both (the Validated condition and the events), as
`kuberl validate` says them. The Ray side is the fake Jobs API (support/fake_dashboard.py)."""

import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from kuberl_api.yamlio import dump_yaml
from support.manifests import with_changes
from support.rljobs import fake_job, wait_for

pytestmark = pytest.mark.cluster

BC = "spec.backend_config"
NO_EFFECT = "actor_rollout_ref.actor.use_torch_compile"
WARNED = f"{BC}.algorithm.use_kl_in_reward"  # with use_kl_loss: KL counted twice, a warning


def kubectl(binary: str, kubeconfig: str, namespace: str, *args: str, stdin: str = "") -> str:
    result = subprocess.run(
        [binary, f"--kubeconfig={kubeconfig}", "-n", namespace, *args],
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
    return result.stdout


def test_describe_shows_the_keys_accepted_without_effect_and_the_warnings(
    dashboard_jobs: Any, local_cluster: Any, kubectl_bin: str, tmp_path: Path
) -> None:
    jobs = dashboard_jobs
    body = fake_job("noeffect", tmp_path, "fake-steps-1-1")
    body = with_changes(body, {f"{BC}.{NO_EFFECT}": False, WARNED: True})
    run = partial(kubectl, kubectl_bin, local_cluster.kubeconfig, jobs.namespace)
    run("apply", "-f", "-", stdin=dump_yaml(body))

    def validated() -> dict | None:
        condition = jobs.condition("noeffect", "Validated")
        return condition if condition.get("status") == "True" else None

    message = wait_for("Validated=True", validated)["message"]
    assert NO_EFFECT in message and WARNED in message, message

    def described() -> str | None:
        text = run("describe", "rlj", "noeffect")
        return text if "KeysWithoutEffect" in text and "ValidationWarnings" in text else None

    wait_for("the events in kubectl describe", described, timeout=60)
    # Reconciled again since (the RayCluster got ready, the attempt was submitted): nothing new
    # to say about the spec.
    jobs.wait_phase("noeffect", "Running", timeout=300)
    text = run("describe", "rlj", "noeffect")
    assert "set but not honoured" in text
    # The condition's message and the KeysWithoutEffect event both name the key.
    assert text.count(NO_EFFECT) >= 2, text
    events = text[text.index("Events:") :]
    assert NO_EFFECT in events and WARNED in events, events
    # Said once for this generation, however often the operator reconciled since.
    assert events.count("KeysWithoutEffect") == 1, events
    assert events.count("ValidationWarnings") == 1, events
