"""Every example manifest and the README's job pass `kubectl apply --dry-run=server` as written.

The real kubectl reads the files (Go's YAML 1.1: an unquoted `rollout.n:` becomes the key
"false") and the real API server checks them against the generated CRD, whose alias properties
and CEL rules accept that spelling once and refuse it beside `n` (docs/config.md).
"""

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kuberl_api.validation import parse_document, validate_document
from kuberl_api.yamlio import load_yaml, load_yaml_all
from support.crds import wait_established

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "rltrainingjobs.kuberl.io.yaml"


def _manifests() -> dict[str, str]:
    """Each RLTrainingJob of the examples (`FILE#i` for a file holding several) and the README."""
    found = {}
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        texts = [t for t in re.split(r"^---\s*$", path.read_text(), flags=re.M) if _is_job(t)]
        for i, text in enumerate(texts):
            found[f"examples/{path.name}" + (f"#{i}" if len(texts) > 1 else "")] = text
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    jobs = [block for block in blocks if "kind: RLTrainingJob" in block]
    assert jobs, "the README shows a job"
    found.update({f"README.md#{i}": block for i, block in enumerate(jobs)})
    return found


def _is_job(text: str) -> bool:
    return any(
        isinstance(doc, dict) and doc.get("kind") == "RLTrainingJob" for doc in load_yaml_all(text)
    )


MANIFESTS = _manifests()


@pytest.fixture(scope="module")
def kubectl(local_cluster: Any, cluster_binaries: Any) -> Any:
    base = [str(cluster_binaries.kubectl), f"--kubeconfig={local_cluster.kubeconfig}"]

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([*base, *args], input=stdin, capture_output=True, text=True)

    applied = run("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))
    assert applied.returncode == 0, applied.stderr
    wait_established(lambda *a: run(*a).stdout, ["rltrainingjobs.kuberl.io"])
    for namespace in {_namespace(text) for text in MANIFESTS.values()}:
        created = run("create", "namespace", namespace)
        assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr
    return run


def _namespace(text: str) -> str:
    return load_yaml(text)["metadata"].get("namespace") or "default"


def _dry_run(kubectl: Any, text: str) -> subprocess.CompletedProcess:
    return kubectl(
        "apply", "--dry-run=server", "-n", _namespace(text), "-o", "json", "-f", "-", stdin=text
    )


def test_examples_include_unquoted_rollout_n() -> None:
    # The case the CRD aliases exist for is exercised, not only quoted files.
    assert any(re.search(r"[{\s]n: \d", text) for text in MANIFESTS.values())


@pytest.mark.parametrize("name", list(MANIFESTS))
def test_manifest_applies_as_written(kubectl: Any, name: str) -> None:
    done = _dry_run(kubectl, MANIFESTS[name])
    assert done.returncode == 0, f"{name}: {done.stderr}"
    # What the API server stored validates in kuberl (the operator's view), n read back.
    stored = json.loads(done.stdout)
    result = validate_document(parse_document(stored))
    assert result.ok, [p.render() for p in result.errors]
    spec = load_yaml(MANIFESTS[name])["spec"]
    if "sft_config" in spec:  # an SFT job: the typed SFT tree is stored as written
        assert result.sft_config is not None
        assert stored["spec"]["sft_config"] == spec["sft_config"]
        return
    assert result.backend_config is not None
    written = spec["backend_config"]["actor_rollout_ref"]
    expected_n = written.get("rollout", {}).get("n", written.get("rollout", {}).get("false", 1))
    assert result.backend_config.actor_rollout_ref.rollout.n == expected_n


def test_n_written_twice_is_refused_at_apply(kubectl: Any) -> None:
    text = MANIFESTS["README.md#0"].replace("rollout: {", "rollout: {'n': 4, ", 1)
    assert "'n': 4, name: vllm, n: 5" in text
    done = _dry_run(kubectl, text)
    assert done.returncode != 0
    assert "n is set twice" in done.stderr and "keep one" in done.stderr


def test_a_misspelt_key_is_still_refused_at_apply(kubectl: Any) -> None:
    text = MANIFESTS["README.md#0"].replace("rollout: {", "rollout: {nn: 4, ", 1)
    done = _dry_run(kubectl, text)
    assert done.returncode != 0
    assert "rollout.nn" in done.stderr
