"""What the API server would refuse in a job's pods is refused at validation, naming the field:
env names, resource quantities, mount paths over the pod's own (issue 29 item 4)."""

from typing import Any

import pytest

from kuberl_operator.config import OperatorConfig
from kuberl_operator.pod_rules import env_name_error, quantity_error
from support.manifests import valid_manifest, with_changes


@pytest.fixture
def make(request: pytest.FixtureRequest) -> Any:
    harness_class = type(request.getfixturevalue("harness"))

    def build(changes: dict[str, Any]) -> Any:
        manifest = with_changes(valid_manifest(), {"metadata.name": "grpo", **changes})
        return harness_class(manifest, OperatorConfig())

    return build


@pytest.mark.parametrize("name", ["A=B", "1ST", "has space", "", "..x", ".", "é"])
def test_env_names_kubernetes_refuses(name: str) -> None:
    assert env_name_error(name) is not None


@pytest.mark.parametrize("name", ["MY_VAR", "my.var", "-x", "_a1", ".x", "HF_HOME"])
def test_env_names_kubernetes_accepts(name: str) -> None:
    assert env_name_error(name) is None


@pytest.mark.parametrize(
    "value", ["4GB", "-1", -2, "1.2.3", "Gi", "", " 4Gi", "4gi", "1e", "12x", "-500m", "."]
)
def test_quantities_kubernetes_refuses(value: Any) -> None:
    assert quantity_error(value) is not None


@pytest.mark.parametrize(
    "value", ["4G", "4Gi", "500m", "0.5", "1e3", "1E-2", 8, "+1", "1.5Ti", "0", "128974848"]
)
def test_quantities_kubernetes_accepts(value: Any) -> None:
    assert quantity_error(value) is None


PVC = {"claimName": "out"}
CASES = {
    "env name with =": (
        {"spec.env": [{"name": "A=B", "value": "1"}]},
        "spec.env[0].name: is not a valid environment variable name",
    ),
    "negative cpu": ({"spec.workerPools[0].cpu": "-1"}, "spec.workerPools[0].cpu: is negative"),
    "memory 4GB": (
        {"spec.workerPools[0].memory": "4GB"},
        "spec.workerPools[0].memory: is not a Kubernetes quantity (got '4GB')",
    ),
    "head memory": ({"spec.head": {"memory": "lots"}}, "spec.head.memory: is not a Kubernetes"),
    "output over /tmp": (
        {"spec.af_output_dir": "/tmp", "spec.storage": {"output": PVC}},
        "spec.af_output_dir: would be mounted over the pod's own /tmp",
    ),
    "output over /dev": (
        {"spec.af_output_dir": "/dev/", "spec.storage": {"output": PVC}},
        "spec.af_output_dir: would be mounted over the pod's own /dev/shm",
    ),
    "model at af_output_dir": (
        {
            "spec.af_output_dir": "/mnt/out",
            "spec.storage": {"output": PVC, "model": {"claimName": "m", "mountPath": "/mnt/out/"}},
        },
        "spec.storage.model.mountPath: is af_output_dir",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_refused_at_validation_with_the_field_and_nothing_created(make: Any, case: str) -> None:
    changes, message = CASES[case]
    job = make(changes)
    job.reconcile()
    validated = job.condition("Validated")
    assert validated["status"] == "False"
    assert message in validated["message"]
    assert job.kube.rayclusters == {}


def test_an_output_dir_under_tmp_elsewhere_is_fine(make: Any) -> None:
    job = make({"spec.af_output_dir": "/mnt/tmp", "spec.storage": {"output": PVC}})
    job.reconcile()
    assert job.condition("Validated")["status"] == "True", job.condition("Validated")
    assert len(job.kube.rayclusters) == 1
