"""The key registry lists every schema leaf exactly once (each honoured key really changes the
plan: ``test_honoured_changes_plan.py``).

The registry is the answer to "does this setting take effect?": a key added to the models
without a fate here fails this test (torchtitan's no-unread-CLI-option test is the model).
"""

from pathlib import Path

import pytest

from kuberl_api.keys import REGISTRY, Fate, entries, schema_leaves

ROOT = Path(__file__).resolve().parents[3]


def test_every_schema_leaf_has_exactly_one_fate():
    leaves = set(schema_leaves())
    unlisted = sorted(leaves - set(REGISTRY))
    assert not unlisted, f"keys with no fate in api/kuberl_api/keys/: {unlisted}"


def test_the_registry_lists_no_key_the_schema_lacks():
    stale = sorted(set(REGISTRY) - set(schema_leaves()))
    assert not stale, f"registered keys that are not in the schema: {stale}"


@pytest.mark.parametrize(
    "entry",
    [e for e in REGISTRY.values() if e.fate is Fate.HONOURED],
    ids=lambda e: e.key,
)
def test_an_honoured_key_names_a_module_that_exists(entry):
    """``where`` is what `kuberl keys` shows a reader. That the key is read at all is proven by
    ``test_honoured_changes_plan.py`` (setting it changes the plan the runtime runs), not by
    its name appearing in that module."""
    assert (ROOT / entry.where).is_file(), f"{entry.key}: {entry.where} does not exist"


def test_every_refused_or_no_effect_key_says_what_to_do_or_why():
    for entry in REGISTRY.values():
        if entry.fate is Fate.REFUSED:
            assert entry.fix, entry.key
        if entry.fate is Fate.NO_EFFECT:
            assert entry.reason, entry.key


def test_entries_filter_by_prefix():
    fsdp = entries("actor_rollout_ref.actor.fsdp_config.")
    assert fsdp and all(e.key.startswith("actor_rollout_ref.actor.fsdp_config.") for e in fsdp)
    assert len(entries()) == len(REGISTRY)
