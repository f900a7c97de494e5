"""The chart's stated minimum versions agree with what the operator needs and with what the
local control plane tests (hack/versions.env)."""

import re
from pathlib import Path

import yaml

from kuberl_operator.kuberay_check import MIN_KUBERAY

REPO = Path(__file__).resolve().parents[2]
CHART = yaml.safe_load((REPO / "charts/kuberl/Chart.yaml").read_text())


def version(text: str) -> tuple[int, ...]:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    assert match, text
    return tuple(int(part or 0) for part in match.groups())


def tested() -> dict[str, str]:
    lines = (REPO / "hack/versions.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_the_kuberay_minimum_is_the_one_the_operator_checks_for() -> None:
    requires = CHART["annotations"]["kuberl.io/requires"]
    assert version(requires) == version(MIN_KUBERAY)
    assert "authOptions" in requires
    assert version(tested()["KUBERAY_VERSION"]) >= version(MIN_KUBERAY)


def test_the_kubernetes_minimum_serves_every_api_the_chart_installs() -> None:
    minimum = version(CHART["kubeVersion"])
    templates = (REPO / "charts/kuberl/templates").glob("*.yaml")
    policies = any("admissionregistration.k8s.io/v1\n" in t.read_text() for t in templates)
    if policies:  # ValidatingAdmissionPolicy is GA (admissionregistration.k8s.io/v1) in 1.30
        assert minimum >= (1, 30, 0)
    assert version(tested()["KUBERNETES_VERSION"]) >= minimum
