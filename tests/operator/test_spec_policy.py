"""What the admin allows job authors, enforced at validation: hostPath and Secret references
off by default, and a size cap on backend_config; each a Validated=False problem with the fix."""

from typing import Any

import pytest

from kuberl_operator.config import OperatorConfig
from support.manifests import valid_manifest, with_changes

SECRET_ENV = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}


@pytest.fixture
def make(request: pytest.FixtureRequest) -> Any:
    harness_class = type(request.getfixturevalue("harness"))

    def build(changes: dict[str, Any], **settings: Any) -> Any:
        manifest = with_changes(valid_manifest(), {"metadata.name": "grpo", **changes})
        return harness_class(manifest, OperatorConfig(**settings))

    return build


CASES = {
    "hostPath": ({"spec.storage.output": {"hostPath": "/data/x"}}, "allow_host_path",
                 "spec.storage.output.hostPath: hostPath volumes are turned off"),
    "secretKeyRef": ({"spec.env": [SECRET_ENV]}, "allow_secret_env",
                     "spec.env[0].valueFrom.secretKeyRef: Secret references in env are turned off"),
    "hostNetwork": ({"spec.network": "hostNetwork"}, "allow_host_network",
                    "spec.network: hostNetwork is turned off by the cluster admin"),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_off_by_default_and_allowed_by_the_admin(make: Any, case: str) -> None:
    changes, setting, message = CASES[case]
    refused = make(changes)
    refused.reconcile()
    validated = refused.condition("Validated")
    assert validated["status"] == "False" and message in validated["message"]
    assert refused.kube.rayclusters == {}
    allowed = make(changes, **{setting: True})
    allowed.reconcile()
    assert allowed.condition("Validated")["status"] == "True"
    assert len(allowed.kube.rayclusters) == 1


def test_an_oversized_backend_config_is_refused(make: Any) -> None:
    huge = {"spec.backend_config.data.apply_chat_template_kwargs": {"blob": "x" * 300_000}}
    job = make(huge)
    job.reconcile()
    validated = job.condition("Validated")
    assert validated["status"] == "False"
    assert "spec.backend_config: is 30" in validated["message"]
    assert "over the 256 KiB limit" in validated["message"]
