"""The chart against the real API server: renders accepted, install works, RBAC is least privilege.

Least privilege is proven with real ServiceAccount tokens (TokenRequest, `kubectl create token`),
never with impersonation: every request below is authenticated as the operator's or a job
runtime's own identity, exactly as in a pod.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The cluster tier's kubectl fixture, shared rather than rewritten.
from cluster.conftest import kubectl  # noqa: F401

from kuberl_operator.builders import JobRef, build_raycluster, build_runtime_rbac
from kuberl_operator.names import runtime_account_name
from kuberl_operator.rbac import OPERATOR_RULES
from support.crds import names_in, wait_established
from support.helm import CHART_DIR, Helm, combinations, job_manifest, token_kubeconfig
from support.manifests import valid_manifest

VOLCANO_CRD = Path(__file__).parents[1] / "operator/contracts/scheduling.volcano.sh_podgroups.yaml"

pytestmark = pytest.mark.cluster

Kubectl = Callable[..., str]
MONITORING_CRDS = Path(__file__).with_name("monitoring-crds.yaml")


@dataclass(frozen=True)
class Release:
    name: str
    namespace: str
    service_account: str
    install_output: str


def short_id() -> str:
    return uuid.uuid4().hex[:6]


@pytest.fixture(scope="module")
def cluster_helm(helm: Helm, local_cluster: Any) -> Helm:
    return helm.with_kubeconfig(local_cluster.kubeconfig)


@pytest.fixture(scope="module")
def namespaces(kubectl: Kubectl) -> Iterator[dict[str, str]]:  # noqa: F811
    """The operator's namespace and two job namespaces, `team` (watched) and `other`."""
    suffix = short_id()
    names = {role: f"chart-{role}-{suffix}" for role in ("operator", "team", "other")}
    for name in names.values():
        kubectl("create", "namespace", name)
    yield names
    for name in names.values():
        kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture(scope="module")
def monitoring_crds(kubectl: Kubectl) -> Iterator[None]:  # noqa: F811
    """ServiceMonitor/PodMonitor kinds for the dry runs, created only if absent, then removed."""
    names = ["crd/servicemonitors.monitoring.coreos.com", "crd/podmonitors.monitoring.coreos.com"]
    present = kubectl("get", *names, "--ignore-not-found", "-o=name").split()
    create = not present  # real prometheus-operator CRDs, if any, are left alone
    if create:
        kubectl("create", "-f", str(MONITORING_CRDS))
    wait_established(kubectl, names)
    yield
    if create:
        kubectl("delete", "-f", str(MONITORING_CRDS), "--wait=false")


@pytest.fixture(scope="module")
def current_crd(kubectl: Kubectl) -> None:  # noqa: F811
    """The chart's CRD as it is now. Helm installs crds/ once and never upgrades it, so a CRD
    left by an earlier install would be stale; this is the documented upgrade step."""
    crd = CHART_DIR / "crds" / "rltrainingjobs.kuberl.io.yaml"
    kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kuberl-chart-test",
        "-f",
        str(crd),
    )
    wait_established(kubectl, names_in(str(crd)))


def install(helm: Helm, name: str, namespace: str, values: dict[str, Any]) -> Release:
    return Release(name, namespace, name, helm.install(name, namespace, values))


def wait_ready(kubectl: Kubectl, release: Release) -> None:  # noqa: F811
    """The operator pod became Ready once. Polled rather than `helm --wait`: kwok's fake nodes
    can miss a heartbeat on a loaded machine, and a brief NotReady must not fail the install."""
    from testcluster.probes import wait_until

    def ready() -> bool:
        replicas = kubectl(
            "get",
            "deployment",
            release.name,
            f"--namespace={release.namespace}",
            "-o=jsonpath={.status.readyReplicas}",
        )
        return replicas == "1"

    wait_until(f"Deployment {release.name} ready", ready, None, timeout=180, interval=1)


@pytest.fixture(scope="module")
def cluster_wide(
    cluster_helm: Helm, namespaces: dict[str, str], current_crd: None
) -> Iterator[Release]:
    release = install(cluster_helm, f"kuberl-{short_id()}", namespaces["operator"], {})
    yield release
    cluster_helm.run("uninstall", release.name, f"--namespace={release.namespace}")


def kubectl_as(
    kubeconfig: str, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess:
    from testcluster.binaries import resolve_binaries

    argv = [str(resolve_binaries().kubectl), f"--kubeconfig={kubeconfig}", *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)


def can_i(kubeconfig: str, verb: str, resource: str, namespace: str | None) -> bool:
    scope = [f"--namespace={namespace}"] if namespace else ["--all-namespaces"]
    result = kubectl_as(kubeconfig, "auth", "can-i", verb, resource, *scope)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode == 0


def create_job(kubectl: Kubectl, name: str, namespace: str) -> JobRef:  # noqa: F811
    kubectl("create", "-f", "-", stdin=json.dumps(job_manifest(name, namespace)))
    uid = kubectl(
        "get", "rltrainingjob", name, f"--namespace={namespace}", "-o=jsonpath={.metadata.uid}"
    )
    return JobRef(name, namespace, uid)


def patch_status(
    kubeconfig: str, job: str, namespace: str, step: int
) -> subprocess.CompletedProcess:
    patch = json.dumps({"status": {"progress": {"globalStep": step}}})
    return kubectl_as(
        kubeconfig,
        "patch",
        "rltrainingjob",
        job,
        f"--namespace={namespace}",
        "--subresource=status",
        "--type=merge",
        f"--patch={patch}",
    )


# ------------------------------------------------------------------------------------------------
# Renders and install


@pytest.mark.parametrize("combination", list(combinations(["team", "other"])))
def test_every_render_is_accepted_by_the_api_server(
    helm: Helm,
    kubectl: Kubectl,  # noqa: F811
    namespaces: dict[str, str],
    monitoring_crds: None,
    combination: str,
) -> None:
    watched = [namespaces["team"], namespaces["other"]]
    values = combinations(watched)[combination]
    text = helm.template_text(
        values, include_crds=True, namespace=namespaces["operator"], release=f"dry-{short_id()}"
    ).stdout
    # Server-side apply: the CRD is too large for client-side apply's last-applied annotation.
    out = kubectl(
        "apply",
        "--dry-run=server",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kuberl-chart-test",
        "-f",
        "-",
        stdin=text,
    )
    kinds = {line.split("/")[0].split(".")[0] for line in out.splitlines() if line}
    assert "deployment" in kinds and "customresourcedefinition" in kinds, out


def test_helm_install_runs_the_operator(
    cluster_wide: Release,
    kubectl: Kubectl,  # noqa: F811
) -> None:
    wait_ready(kubectl, cluster_wide)
    notes = cluster_wide.install_output
    assert "kubectl apply" in notes and "kubectl get rlj" in notes
    # KubeRay runs in the test cluster, so NOTES has no reason to warn about it.
    assert "does not serve ray.io/v1 RayCluster" not in notes
    crd = kubectl("get", "crd", "rltrainingjobs.kuberl.io", "-o=name")
    assert crd.strip() == "customresourcedefinition.apiextensions.k8s.io/rltrainingjobs.kuberl.io"


# ------------------------------------------------------------------------------------------------
# Least privilege, with real tokens


@pytest.fixture(scope="module")
def operator_kubeconfig(
    cluster_wide: Release,
    kubectl: Kubectl,  # noqa: F811
    local_cluster: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    path = tmp_path_factory.mktemp("tokens") / "operator.kubeconfig"
    return token_kubeconfig(
        local_cluster.kubeconfig, cluster_wide.service_account, cluster_wide.namespace, path
    )


@pytest.mark.parametrize(
    ("verb", "resource"),
    [
        ("get", "rltrainingjobs.kuberl.io"),
        ("list", "rltrainingjobs.kuberl.io"),
        ("watch", "rltrainingjobs.kuberl.io"),
        ("patch", "rltrainingjobs.kuberl.io"),
        ("patch", "rltrainingjobs.kuberl.io/status"),
        ("create", "rayclusters.ray.io"),
        ("delete", "rayclusters.ray.io"),
        ("create", "events"),
        ("create", "serviceaccounts"),
        ("create", "roles.rbac.authorization.k8s.io"),
        ("create", "rolebindings.rbac.authorization.k8s.io"),
    ],
)
def test_operator_token_may_do_its_job(
    operator_kubeconfig: str, namespaces: dict[str, str], verb: str, resource: str
) -> None:
    assert can_i(operator_kubeconfig, verb, resource, namespaces["team"])


@pytest.mark.parametrize(
    ("verb", "resource", "scope"),
    [
        ("get", "secrets", "team"),
        ("list", "secrets", None),
        ("get", "secrets", "operator"),
        ("get", "configmaps", "team"),
        ("create", "pods", "team"),
        ("create", "pods/exec", "team"),
        ("update", "rayclusters.ray.io", "team"),
        ("create", "deployments.apps", "team"),
        ("delete", "nodes", None),
        ("create", "clusterroles.rbac.authorization.k8s.io", None),
        ("create", "clusterrolebindings.rbac.authorization.k8s.io", None),
        ("bind", "roles.rbac.authorization.k8s.io", "team"),
        ("escalate", "roles.rbac.authorization.k8s.io", "team"),
        ("impersonate", "serviceaccounts", "team"),
        ("create", "customresourcedefinitions.apiextensions.k8s.io", None),
    ],
)
def test_operator_token_may_not_do_more(
    operator_kubeconfig: str,
    namespaces: dict[str, str],
    verb: str,
    resource: str,
    scope: str | None,
) -> None:
    namespace = namespaces[scope] if scope else None
    assert not can_i(operator_kubeconfig, verb, resource, namespace)


def test_operator_token_runs_the_operators_calls_and_is_refused_secrets(
    operator_kubeconfig: str,
    kubectl: Kubectl,  # noqa: F811
    namespaces: dict[str, str],
) -> None:
    team = namespaces["team"]
    job = create_job(kubectl, f"op-{short_id()}", team)
    listed = kubectl_as(operator_kubeconfig, "get", "rltrainingjobs", "--all-namespaces")
    assert listed.returncode == 0 and job.name in listed.stdout, listed.stderr
    assert patch_status(operator_kubeconfig, job.name, team, 1).returncode == 0
    # The runtime identity is created by the operator: this passes RBAC's escalation check only
    # because the operator holds every permission the runtime Role grants.
    objects = {"apiVersion": "v1", "kind": "List", "items": build_runtime_rbac(job)}
    created = kubectl_as(operator_kubeconfig, "create", "-f", "-", stdin=json.dumps(objects))
    assert created.returncode == 0, created.stderr
    cluster = build_raycluster(job, _spec(), 1, "ghcr.io/kuberl/runtime-cuda:0.1.0")
    dry = kubectl_as(
        operator_kubeconfig, "create", "--dry-run=server", "-f", "-", stdin=json.dumps(cluster)
    )
    assert dry.returncode == 0, dry.stderr
    secrets = kubectl_as(operator_kubeconfig, "get", "secrets", f"--namespace={team}")
    assert secrets.returncode != 0 and "Forbidden" in secrets.stderr


def _spec() -> Any:
    from kuberl_api.job import RLTrainingJob

    return RLTrainingJob.model_validate(valid_manifest()).spec


def test_runtime_token_patches_only_its_own_jobs_status(
    operator_kubeconfig: str,
    kubectl: Kubectl,  # noqa: F811
    local_cluster: Any,
    namespaces: dict[str, str],
    tmp_path: Path,
) -> None:
    team = namespaces["team"]
    mine = create_job(kubectl, f"mine-{short_id()}", team)
    theirs = create_job(kubectl, f"theirs-{short_id()}", team)
    objects = {"apiVersion": "v1", "kind": "List", "items": build_runtime_rbac(mine)}
    created = kubectl_as(operator_kubeconfig, "create", "-f", "-", stdin=json.dumps(objects))
    assert created.returncode == 0, created.stderr
    account = runtime_account_name(mine.name)
    runtime = token_kubeconfig(local_cluster.kubeconfig, account, team, tmp_path / "runtime")

    own = patch_status(runtime, mine.name, team, 7)
    assert own.returncode == 0, own.stderr
    step = kubectl(
        "get",
        "rltrainingjob",
        mine.name,
        f"--namespace={team}",
        "-o=jsonpath={.status.progress.globalStep}",
    )
    assert step == "7"
    other = patch_status(runtime, theirs.name, team, 7)
    assert other.returncode != 0 and "Forbidden" in other.stderr
    spec = kubectl_as(runtime, "label", "rltrainingjob", mine.name, f"--namespace={team}", "x=y")
    assert spec.returncode != 0 and "Forbidden" in spec.stderr
    assert not can_i(runtime, "get", "secrets", team)
    assert not can_i(runtime, "list", "rltrainingjobs.kuberl.io", team)
    assert not can_i(runtime, "create", "rayclusters.ray.io", team)


# ------------------------------------------------------------------------------------------------
# Namespaced mode


def test_namespaced_install_sees_only_its_namespaces(
    cluster_helm: Helm,
    kubectl: Kubectl,  # noqa: F811
    local_cluster: Any,
    namespaces: dict[str, str],
    tmp_path: Path,
) -> None:
    operator_ns = f"chart-nsop-{short_id()}"
    kubectl("create", "namespace", operator_ns)
    values = {"operator": {"watchNamespaces": [namespaces["team"]]}}
    release = install(cluster_helm, f"kuberl-ns-{short_id()}", operator_ns, values)
    try:
        owned = kubectl(
            "get",
            "clusterroles,clusterrolebindings",
            f"--selector=app.kubernetes.io/instance={release.name}",
            "-o=name",
        )
        assert owned.strip() == ""
        config = token_kubeconfig(
            local_cluster.kubeconfig, release.service_account, operator_ns, tmp_path / "op"
        )
        assert can_i(config, "list", "rltrainingjobs.kuberl.io", namespaces["team"])
        assert can_i(config, "create", "rayclusters.ray.io", namespaces["team"])
        assert not can_i(config, "list", "rltrainingjobs.kuberl.io", namespaces["other"])
        assert not can_i(config, "list", "rltrainingjobs.kuberl.io", None)
        assert not can_i(config, "get", "secrets", namespaces["team"])
    finally:
        cluster_helm.run("uninstall", release.name, f"--namespace={operator_ns}")
        kubectl("delete", "namespace", operator_ns, "--wait=false")


def test_cluster_scoped_marks_match_the_api_servers_discovery(
    kubectl: Kubectl,  # noqa: F811
    cluster_wide: Release,
) -> None:
    import sync_chart

    # The operator's rules name Volcano's PodGroups; serve their CRD (our contract copy) as a
    # cluster with Volcano installed would, whatever order the tiers ran in.
    kubectl("apply", "--server-side", f"--filename={VOLCANO_CRD}")
    wait_established(kubectl, names_in(str(VOLCANO_CRD)))
    cluster_scoped = set(kubectl("api-resources", "--namespaced=false", "-o=name").split())
    namespaced = set(kubectl("api-resources", "--namespaced=true", "-o=name").split())
    for rule in OPERATOR_RULES:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                name = resource.split("/")[0] + (f".{group}" if group else "")
                assert name in cluster_scoped | namespaced, f"{name} is not served"
                assert (name in cluster_scoped) == sync_chart.is_cluster_scoped(rule), name
