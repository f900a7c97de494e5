"""`helm lint` and `helm template` of charts/kuberl: what every render must and must not contain."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from kuberl_api.job import RLTrainingJob
from kuberl_cli.main import build_parser
from kuberl_operator.builders import JobRef, build_raycluster
from kuberl_operator.config import from_args
from kuberl_operator.metrics import Metrics
from kuberl_operator.names import LABEL_JOB
from kuberl_operator.rbac import LEADER_ELECTION_RULES, OPERATOR_RULES
from support.helm import CHART_DIR, NAMESPACE, RELEASE, Helm, Manifests, combinations
from support.manifests import valid_manifest

WATCHED = ["team-a", "team-b"]
COMBINATIONS = combinations(WATCHED)


def test_chart_rbac_file_says_which_rules_are_cluster_scoped() -> None:
    import sync_chart

    # The namespaced render drops exactly these; the cluster tier checks them against discovery.
    scoped = [rule for rule in OPERATOR_RULES if sync_chart.is_cluster_scoped(rule)]
    assert {r for rule in scoped for r in rule["resources"]} == {
        "customresourcedefinitions",
        "namespaces",
    }


@pytest.fixture(scope="module")
def rendered(helm: Helm) -> dict[str, Manifests]:
    return {name: helm.template(values) for name, values in COMBINATIONS.items()}


def operator_container(manifests: Manifests) -> dict[str, Any]:
    (container,) = manifests.one("Deployment")["spec"]["template"]["spec"]["containers"]
    return container


def cluster_scoped(rule: dict[str, Any]) -> bool:
    import sync_chart

    return sync_chart.is_cluster_scoped(rule)


@pytest.mark.parametrize("name", COMBINATIONS)
def test_helm_lint_is_clean(helm: Helm, name: str) -> None:
    result = helm.lint(COMBINATIONS[name])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


def test_default_render_has_exactly_the_core_objects(rendered: dict[str, Manifests]) -> None:
    assert rendered["default"].kinds() == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",  # leader election: the Lease in the release namespace
        "RoleBinding",
        "Deployment",
        "Service",
        "Secret",  # the key of the Ray heads' tokens
        "ValidatingAdmissionPolicy",  # the runtime may change only its progress
        "ValidatingAdmissionPolicyBinding",
    }
    cluster_scoped_kinds = ("ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                            "ValidatingAdmissionPolicyBinding")  # fmt: skip
    for doc in rendered["default"]:
        if doc["kind"] not in cluster_scoped_kinds:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]


def test_crd_is_installed_from_the_chart_crds_dir(helm: Helm) -> None:
    with_crds = helm.template(include_crds=True)
    (crd,) = with_crds.of_kind("CustomResourceDefinition")
    assert crd["metadata"]["name"] == "rltrainingjobs.kuberl.io"


def test_chart_copies_are_current() -> None:
    import sync_chart

    stale = sync_chart.stale_files()
    assert not stale, f"stale chart files {stale}: run `make crds` (hack/sync_chart.py)"
    # Byte-for-byte, as Helm would install it.
    assert sync_chart.CRD_TARGET.read_bytes() == sync_chart.CRD_SOURCE.read_bytes()


# YAML 1.1 booleans that PyYAML writes as plain keys but Go's YAML (kubectl, helm) reads as true
# or false: an unquoted `n:` in the CRD becomes a property named "false", and the API server then
# rejects `rollout.n` as an unknown field.
YAML11_BOOLEAN_KEY = re.compile(
    r"^\s*-?\s*(y|Y|n|N|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF):", re.MULTILINE
)


def test_crd_keys_mean_the_same_to_kubectl_and_helm() -> None:
    import sync_chart

    text = sync_chart.CRD_TARGET.read_text()
    found = sorted({m.group(0).strip() for m in YAML11_BOOLEAN_KEY.finditer(text)})
    assert not found, (
        f"unquoted keys {found} in the CRD are booleans to Go's YAML parser; the CRD generator "
        "(`kuberl crd`) must quote them"
    )


@pytest.mark.parametrize("name", COMBINATIONS)
def test_operator_runs_locked_down(rendered: dict[str, Manifests], name: str) -> None:
    deployment = rendered[name].one("Deployment")
    assert deployment["spec"]["replicas"] == 1  # kopf has no leader election
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = operator_container(rendered[name])
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    (tmp,) = (m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[tmp["name"]]
    assert pod["serviceAccountName"] == rendered[name].one("ServiceAccount")["metadata"]["name"]


def parse_operator_args(container: dict[str, Any]) -> Any:
    """The container's command line as `kuberl operator` itself parses it."""
    assert container["command"] == ["kuberl", "operator"]
    args = build_parser().parse_args(["operator", *container["args"]])
    return from_args(args)


def test_operator_flags_are_the_clis_own(rendered: dict[str, Manifests]) -> None:
    container = operator_container(rendered["default"])
    config = parse_operator_args(container)
    assert config.namespaces == ()
    assert config.default_image == "ghcr.io/kuberl/runtime-cuda:0.1.0"
    assert config.metrics_port == 8080
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert config.liveness_endpoint == f"http://0.0.0.0:{ports['healthz']}/healthz"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "healthz"}
    assert ports["metrics"] == config.metrics_port
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KUBERL_LOG_FORMAT"] == "plain"

    namespaced = parse_operator_args(operator_container(rendered["namespaced"]))
    assert namespaced.namespaces == tuple(WATCHED)


def test_cluster_role_is_the_operators_rule_list(rendered: dict[str, Manifests]) -> None:
    manifests = rendered["default"]
    (role,) = (r for r in manifests.of_kind("ClusterRole") if r["metadata"]["name"] == RELEASE)
    assert role["rules"] == OPERATOR_RULES
    binding = manifests.one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    account = manifests.one("ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": NAMESPACE}
    ]


@pytest.mark.parametrize("name", ["namespaced", "everything"])
def test_namespaced_mode_grants_roles_only(rendered: dict[str, Manifests], name: str) -> None:
    manifests = rendered[name]
    assert not manifests.of_kind("ClusterRole") and not manifests.of_kind("ClusterRoleBinding")
    roles = [r for r in manifests.of_kind("Role") if not _leader_election(r)]
    bindings = [b for b in manifests.of_kind("RoleBinding") if not _leader_election(b)]
    assert sorted(r["metadata"]["namespace"] for r in roles) == WATCHED
    assert sorted(b["metadata"]["namespace"] for b in bindings) == WATCHED
    expected = [rule for rule in OPERATOR_RULES if not cluster_scoped(rule)]
    for role in roles:
        assert role["rules"] == expected
    for binding in bindings:
        assert binding["subjects"][0]["namespace"] == NAMESPACE


def _leader_election(doc: dict[str, Any]) -> bool:
    return doc["metadata"]["name"] == f"{RELEASE}-leader-election"


@pytest.mark.parametrize("name", ["default", "namespaced"])
def test_leader_election_lease_is_granted_in_the_release_namespace_only(
    rendered: dict[str, Manifests], name: str
) -> None:
    manifests = rendered[name]
    (role,) = (r for r in manifests.of_kind("Role") if _leader_election(r))
    (binding,) = (b for b in manifests.of_kind("RoleBinding") if _leader_election(b))
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == LEADER_ELECTION_RULES
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    account = manifests.one("ServiceAccount")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                    "namespace": NAMESPACE}]  # fmt: skip
    env = {e["name"] for e in operator_container(manifests)["env"]}
    assert "KUBERL_OPERATOR_NAMESPACE" in env  # where the operator looks for the Lease


def test_rbac_can_be_left_to_the_user(helm: Helm) -> None:
    manifests = helm.template(
        {"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "mine"}}
    )
    assert manifests.kinds() == {"Deployment", "Service", "Secret", "ValidatingAdmissionPolicy",
                                 "ValidatingAdmissionPolicyBinding"}  # fmt: skip
    pod = manifests.one("Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "mine"


def test_monitors_are_off_by_default(rendered: dict[str, Manifests]) -> None:
    for name in ("default", "namespaced", "dashboard-on"):
        assert not {"ServiceMonitor", "PodMonitor"} & rendered[name].kinds()


def test_service_monitor_scrapes_the_metrics_service(rendered: dict[str, Manifests]) -> None:
    manifests = rendered["metrics-on"]
    monitor = manifests.one("ServiceMonitor")
    service = manifests.one("Service")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert service["spec"]["selector"].items() <= (
        manifests.one("Deployment")["spec"]["template"]["metadata"]["labels"].items()
    )


def test_pod_monitor_selects_what_the_operator_builds(rendered: dict[str, Manifests]) -> None:
    monitor = rendered["metrics-on"].one("PodMonitor")
    assert monitor["spec"]["selector"] == {
        "matchExpressions": [{"key": LABEL_JOB, "operator": "Exists"}]
    }
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    scoped = rendered["everything"].one("PodMonitor")
    assert scoped["spec"]["namespaceSelector"] == {"matchNames": WATCHED}

    job = RLTrainingJob.model_validate(valid_manifest())
    cluster = build_raycluster(JobRef("t", "team-a", "uid-1"), job.spec, 1, "img")
    templates = [cluster["spec"]["headGroupSpec"]["template"]] + [
        group["template"] for group in cluster["spec"]["workerGroupSpecs"]
    ]
    for template in templates:
        assert LABEL_JOB in template["metadata"]["labels"]
    head_ports = {
        port["name"]
        for container in templates[0]["spec"]["containers"]
        for port in container.get("ports", [])
    }
    endpoints = {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]}
    assert endpoints & head_ports, f"no scraped port {endpoints} is declared by the head pod"


def test_dashboard_configmap(rendered: dict[str, Manifests]) -> None:
    assert not rendered["default"].of_kind("ConfigMap")
    configmap = rendered["dashboard-on"].one("ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = configmap["data"].values()
    dashboard = json.loads(text)
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    joined = "\n".join(exprs)
    for needle in (
        "kuberl_jobs",
        "kuberl_job_restarts_total",
        "rate(kuberl_job_global_step{",
        "kuberl_runtime_critic_score_mean",
        "kuberl_runtime_perf_throughput",
        "kuberl_job_time_to_first_step_seconds_bucket",
    ):
        assert needle in joined, needle
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {"critic/score/mean", "perf/throughput", "Jobs by phase"} <= titles


def test_dashboard_queries_metrics_the_operator_exports() -> None:
    exported = set()
    for family in Metrics().registry.collect():
        exported.add(family.name)
        exported.update(family.name + suffix for suffix in SAMPLE_SUFFIXES.get(family.type, ()))
    dashboard = json.loads((CHART_DIR / "files" / "dashboard.json").read_text())
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in metric_names(target["expr"])
        if not name.startswith("kuberl_runtime_")  # the runtime's, checked where it exports them
    }
    assert queried, "the dashboard queries no operator metric"
    assert queried <= exported, f"the operator does not export {queried - exported}"


SAMPLE_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}


def metric_names(expr: str) -> set[str]:
    """kuberl metric names in a PromQL expression, leaving out label names."""
    without_labels = re.sub(r"\{[^}]*\}|\b(by|without)\s*\([^)]*\)", "", expr)
    return set(re.findall(r"\b(kuberl_[a-z0-9_]+)\b", without_labels))


def test_release_name_and_overrides_reach_every_name(helm: Helm) -> None:
    manifests = helm.template({"fullnameOverride": "rl"}, release="other")
    names = {doc["metadata"]["name"] for doc in manifests}
    suffixes = ("", "-metrics", "-ray-token-key", "-runtime-status", "-view", "-edit",
                "-leader-election")  # fmt: skip
    assert names == {f"rl{suffix}" for suffix in suffixes}
    default = helm.template(release=RELEASE)
    assert {doc["metadata"]["name"] for doc in default} == {RELEASE + s for s in suffixes}
