"""One tenant cannot stall the operator: on the real API server, with the operator process
running, a self-doubling ${...} chain, an affinity nested thousands of levels deep and an env
that would switch the head's token lock off are each Validated=False naming the limit or the
entry, while a good job applied after them is validated and driven meanwhile. Its head (the
fake Jobs API, which answers without a token) fails the attempt HeadUnauthenticated.
"""

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kuberl_operator.bounds import MAX_DEPTH, RECURSION_LIMIT
from support.rljobs import Jobs, fake_job, wait_for

pytestmark = pytest.mark.cluster

BOMB_LEVELS = 40  # unbounded, 14 levels already took seconds on one core; 40 never ends
DEEP_LEVELS = 3000  # the API server admits it; Python's json.loads fails past ~1,000 levels
BAD = ("bomb", "deep", "unlocked")


def nested(levels: int) -> dict[str, Any]:
    tree: dict[str, Any] = {"weight": 1}
    for _ in range(levels):
        tree = {"a": tree}
    return tree


def bomb() -> dict[str, str]:
    tree = {"l0": "xx"}
    for i in range(1, BOMB_LEVELS):
        tree[f"l{i}"] = f"${{.l{i - 1}}}${{.l{i - 1}}}"
    return tree


def validated(jobs: Jobs, name: str, status: str) -> dict[str, Any]:
    return wait_for(
        f"{name} Validated={status}",
        lambda: (c := jobs.condition(name, "Validated")).get("status") == status and c,
        timeout=120,
    )


@pytest.fixture
def deep_objects() -> Iterator[None]:
    """This test process decodes the deep job too (each status read): room for it."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(RECURSION_LIMIT)
    yield
    sys.setrecursionlimit(before)


@pytest.fixture
def locked_jobs(
    deep_objects: None,
    kube_api: Any,
    local_cluster: Any,
    job_namespace: str,
    dashboard: Any,
    tmp_path: Path,
) -> Iterator[tuple[Jobs, Any]]:
    """An operator whose every head is the fake Jobs API, told that head's token (as the
    ray_head tier is): it then checks that the head refuses a request without it."""
    from support.fake_dashboard import operator_on

    token = tmp_path / "token"
    token.write_text("t" * 64)
    log = tmp_path / "op.log"
    with operator_on(
        local_cluster.kubeconfig, job_namespace, dashboard, log,
        "--dashboard-token-file", str(token),
    ) as process:  # fmt: skip
        yield Jobs(kube_api, job_namespace), process


def test_bad_specs_are_refused_within_a_bound_while_a_good_job_goes_on(
    locked_jobs: Any, dashboard: Any, tmp_path: Path
) -> None:
    jobs, process = locked_jobs
    bad = {name: fake_job(name, tmp_path, "fake-steps-1-1") for name in BAD}
    # A free-form subtree (x-kubernetes-preserve-unknown-fields): the API server keeps it.
    bad["bomb"]["spec"]["backend_config"]["actor_rollout_ref"]["model"]["override_config"] = bomb()
    bad["deep"]["spec"]["workerPools"][0]["affinity"] = nested(DEEP_LEVELS)
    bad["unlocked"]["spec"]["env"] = [{"name": "RAY_AUTH_MODE", "value": "disabled"}]
    started = time.monotonic()
    for body in bad.values():
        jobs.apply(body)
    jobs.apply(fake_job("good", tmp_path, "fake-steps-1-1"))

    good = validated(jobs, "good", "True")
    assert good["message"].startswith("spec and backend_config are valid")
    messages = {name: validated(jobs, name, "False")["message"] for name in bad}
    took = time.monotonic() - started
    assert "spec.backend_config.actor_rollout_ref.model.override_config.l" in messages["bomb"]
    assert any(limit in messages["bomb"] for limit in ("MAX_RESOLVED", "MAX_LOOKUPS", "MAX_CHAIN"))
    assert f"more than {MAX_DEPTH} levels" in messages["deep"]
    assert "spec.workerPools[0].affinity.a.a" in messages["deep"]
    assert "spec.env[0].name: is set by the operator" in messages["unlocked"]
    assert "'RAY_AUTH_MODE'" in messages["unlocked"]
    # The good job goes on to its RayCluster (polled: created after Validated, and deleted
    # again once its attempt fails below); no bad job ever gets one.
    wait_for(
        "good's RayCluster or its failed attempt",
        lambda: jobs.rayclusters() or jobs.status("good").get("attempts"),
        timeout=300,
    )
    assert all(rc["metadata"]["labels"]["kuberl.io/job"] == "good" for rc in jobs.rayclusters())

    # The good job's head answers without a token: its attempt fails, nothing is submitted.
    failed = wait_for(
        "good's attempt fails HeadUnauthenticated",
        lambda: next((a for a in jobs.status("good").get("attempts") or []
                      if a.get("reason") == "HeadUnauthenticated"), None),
        timeout=300,
    )  # fmt: skip
    assert "answered a request without its token" in failed["message"]
    assert dashboard.submissions == []
    assert process.poll() is None, "the operator is still running"
    print(f"4 jobs validated/refused in {took:.1f}s")
