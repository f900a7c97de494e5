"""At start the operator refuses a KubeRay whose RayCluster CRD cannot lock heads."""

from typing import Any

from kuberl_operator.kuberay_check import auth_options_problem


def crd(spec_fields: list[str], version: str = "v1") -> dict[str, Any]:
    properties = {name: {"type": "object"} for name in spec_fields}
    schema = {"openAPIV3Schema": {"properties": {"spec": {"properties": properties}}}}
    return {"spec": {"versions": [{"name": version, "schema": schema}]}}


def test_a_crd_with_auth_options_passes() -> None:
    assert auth_options_problem(crd(["headGroupSpec", "authOptions"])) is None


def test_an_older_kuberay_is_refused_naming_the_field_and_the_fix() -> None:
    problem = auth_options_problem(crd(["headGroupSpec", "workerGroupSpecs"]))
    assert problem is not None
    assert "rayclusters.ray.io (v1) has no spec.authOptions" in problem
    assert "upgrade KubeRay" in problem and "kubectl apply --server-side" in problem


def test_no_crd_or_no_v1_is_refused() -> None:
    missing = auth_options_problem(None)
    assert missing is not None and "is not installed" in missing
    old = auth_options_problem(crd(["authOptions"], version="v1alpha1"))
    assert old is not None and "has no version v1" in old
