"""Fuzz `backend_config` against the validator: whatever a user writes, it answers with problems
(or ok), never with a crash. Values are set at real schema paths (taken from the CRD, which is
generated from the models) and at near-miss keys, so most examples get past the first check."""

from functools import cache
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kuberl_api.crd import build_crd
from kuberl_api.validation import parse_document, validate_document
from kuberl_api.validation.problems import SpecInvalid
from support.manifests import valid_manifest, with_changes

BC = "spec.backend_config"


@cache
def schema_paths() -> dict[str, bool]:
    """Every dotted path under backend_config in the CRD's schema: is it a branch (object)?"""
    crd = build_crd()
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    paths: dict[str, bool] = {}

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, child in (node.get("properties") or {}).items():
            if "." in key:  # quoted dotted keys (rollout.n aliases) cannot be set by path
                continue
            paths[f"{prefix}.{key}"] = child.get("type") == "object"
            walk(child, f"{prefix}.{key}")

    walk(spec["properties"]["backend_config"], BC)
    return paths


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["${data.train_batch_size}", "${oops}", "${a.${b}}", "grpo", "gae", "auto"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def mutations(draw: st.DrawFn) -> dict[str, Any]:
    paths = schema_paths()
    changes: dict[str, Any] = {}
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        path = draw(st.sampled_from(sorted(paths)))
        if draw(st.booleans()):  # a near miss; a key below a leaf could not even be written
            path += draw(st.sampled_from(["_", "s", ".extra"] if paths[path] else ["_", "s"]))
        changes[path] = draw(values)
    return changes


def _settable(changes: dict[str, Any]) -> dict[str, Any]:
    """Drop paths that run through a value set by an earlier (shorter) path."""
    kept: dict[str, Any] = {}
    for path in sorted(changes, key=len):
        if not any(path.startswith(prefix + ".") for prefix in kept):
            kept[path] = changes[path]
    return kept


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations())
def test_random_backend_configs_never_crash_the_validator(changes):
    manifest = with_changes(valid_manifest(), _settable(changes))
    try:
        result = validate_document(parse_document(manifest))
    except SpecInvalid as err:
        assert err.problems
        return
    assert result.ok or result.errors
    for problem in result.problems:
        assert problem.path and problem.render()


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=10), values, max_size=6))
def test_arbitrary_backend_config_trees_never_crash_the_validator(tree):
    manifest = with_changes(valid_manifest(), {BC: tree})
    try:
        result = validate_document(parse_document(manifest))
    except SpecInvalid as err:
        assert err.problems
        return
    assert not result.ok  # data and actor_rollout_ref are required, and a random tree lacks them
