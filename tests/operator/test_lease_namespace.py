"""Where the leader-election Lease lives when nobody says (leader.py: lease_namespace)."""

from pathlib import Path

import yaml

from kuberl_operator.leader import CHART_NAMESPACE, lease_namespace


def _kubeconfig(path: Path, namespace: str | None) -> str:
    context = {"cluster": "c", "user": "u", **({"namespace": namespace} if namespace else {})}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "ctx", "context": context}],
                "current-context": "ctx",
            }
        )
    )
    return str(path)


def test_the_flag_and_the_operator_namespace_come_first(tmp_path: Path):
    env = {"POD_NAMESPACE": "pod-ns", "KUBECONFIG": _kubeconfig(tmp_path / "k", "ctx-ns")}
    no_file = tmp_path / "absent"
    assert lease_namespace("flag-ns", "op-ns", env, no_file) == "flag-ns"
    assert lease_namespace(None, "op-ns", env, no_file) == "op-ns"
    assert lease_namespace(None, None, env, no_file) == "pod-ns"


def test_in_a_pod_its_service_account_namespace(tmp_path: Path):
    sa_file = tmp_path / "namespace"
    sa_file.write_text("release-ns\n")
    env = {"KUBECONFIG": _kubeconfig(tmp_path / "k", "ctx-ns")}
    assert lease_namespace(None, None, env, sa_file) == "release-ns"


def test_out_of_the_cluster_the_context_namespace_else_the_charts(tmp_path: Path):
    no_file = tmp_path / "absent"
    with_ns = {"KUBECONFIG": _kubeconfig(tmp_path / "a", "team-ops")}
    assert lease_namespace(None, None, with_ns, no_file) == "team-ops"
    without_ns = {"KUBECONFIG": _kubeconfig(tmp_path / "b", None)}
    assert lease_namespace(None, None, without_ns, no_file) == CHART_NAMESPACE == "kuberl-system"
    missing = {"KUBECONFIG": str(tmp_path / "no-kubeconfig")}
    assert lease_namespace(None, None, missing, no_file) == CHART_NAMESPACE
    # a KUBECONFIG list: the current context as kubectl merges it (the first file that sets it)
    listed = {"KUBECONFIG": f"{tmp_path / 'a'}:{tmp_path / 'b'}"}
    assert lease_namespace(None, None, listed, no_file) == "team-ops"
