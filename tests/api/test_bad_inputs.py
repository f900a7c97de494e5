"""Every kind of mistake is reported with its exact path, the bad value and what to do."""

import pytest

from kuberl_api.validation import parse_document, validate_document
from support.bad_inputs import BC, CASES
from support.manifests import valid_manifest, with_changes


@pytest.mark.parametrize(
    ("changes", "path", "phrase"), CASES, ids=[c[1] + str(i) for i, c in enumerate(CASES)]
)
def test_bad_input_names_field_and_fix(changes, path, phrase):
    result = validate_document(parse_document(with_changes(valid_manifest(), changes)))

    assert not result.ok
    matching = [p for p in result.errors if p.path == path]
    assert matching, f"no error at {path}; got {[p.render() for p in result.errors]}"
    assert any(phrase in p.render() for p in matching), [p.render() for p in matching]
    assert result.backend_config is None


def test_all_problems_are_reported_at_once():
    bad = with_changes(
        valid_manifest(),
        {
            f"{BC}.data.trian_files": "/x",
            f"{BC}.algorithm.adv_estimator": "grpoo",
            "spec.workerPools[0].nodes": 0,
        },
    )
    paths = {p.path for p in validate_document(parse_document(bad)).errors}
    assert {
        f"{BC}.data.trian_files",
        f"{BC}.algorithm.adv_estimator",
        "spec.workerPools[0].nodes",
    } <= paths


def test_the_base_manifest_is_valid():
    result = validate_document(parse_document(valid_manifest()))
    assert result.ok, [p.render() for p in result.problems]
