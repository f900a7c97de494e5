"""The key registry lists every schema leaf exactly once, and each honoured key is really read.

The registry is the answer to "does this setting take effect?": a key added to the models
without a fate here fails this test (torchtitan's no-unread-CLI-option test is the model).
"""

import re
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


def _reads(entry) -> bool:
    where = ROOT / entry.where
    files = sorted(where.rglob("*.py")) if where.is_dir() else [where]
    name = entry.key.rsplit(".", 1)[-1]
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    return any(f.is_file() and pattern.search(f.read_text()) for f in files)


@pytest.mark.parametrize(
    "entry",
    [e for e in REGISTRY.values() if e.fate is Fate.HONOURED],
    ids=lambda e: e.key,
)
def test_an_honoured_key_names_a_module_that_reads_it(entry):
    assert (ROOT / entry.where).exists(), f"{entry.key}: {entry.where} does not exist"
    assert _reads(entry), f"{entry.key}: {entry.where} never mentions it"


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
