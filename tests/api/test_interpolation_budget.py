"""``${...}`` resolution has a budget: a self-doubling chain is refused at once, naming the limit,
before OmegaConf (which keeps no memo) spends exponential time on it."""

import time

from kuberl_api.validation.interpolation import resolve_interpolations
from kuberl_api.validation.interpolation_budget import (
    MAX_CHAIN,
    MAX_LOOKUPS,
    MAX_NAMED,
    MAX_RESOLVED_CHARS,
    MAX_TOTAL_LOOKUPS,
)


def doubling(levels: int, seed: str = "xx") -> dict:
    """l0: seed, l1: ${l0}${l0}, ...: a few hundred bytes that resolve to 2**levels copies."""
    tree: dict = {"l0": seed}
    for i in range(1, levels):
        tree[f"l{i}"] = f"${{l{i - 1}}}${{l{i - 1}}}"
    return tree


def test_a_doubling_chain_is_refused_quickly_naming_the_size_limit():
    started = time.process_time()
    resolved, problems = resolve_interpolations(doubling(40), "spec.backend_config")
    assert time.process_time() - started < 5  # unbounded, level 40 never finishes
    assert resolved == doubling(40)  # nothing resolved
    assert 1 <= len(problems) <= MAX_NAMED + 1
    first = problems[0]
    assert first.path.startswith("spec.backend_config.l")
    assert "MAX_RESOLVED_CHARS" in first.message or "MAX_CHAIN" in first.message
    assert "${" in first.value and "break the chain" in first.hint


def test_the_size_limit_names_the_leaf_that_crosses_it():
    # l<n> resolves to 4096 * 2**n characters: l4 is exactly at the limit, l5 over it.
    assert MAX_RESOLVED_CHARS == 4096 * 2**4
    _, problems = resolve_interpolations(doubling(6, seed="x" * 4096), "bc")
    assert [p.path for p in problems] == ["bc.l5"]
    assert f"more than {MAX_RESOLVED_CHARS} characters" in problems[0].message


def test_empty_doubling_is_refused_by_the_lookup_count():
    _, problems = resolve_interpolations(doubling(30, seed=""), "bc")
    assert problems and f"more than {MAX_LOOKUPS} lookups" in problems[0].message


def test_many_values_within_their_own_budget_are_refused_by_the_total():
    tree = doubling(11)  # l10: 2**11 - 1 lookups, under MAX_LOOKUPS
    tree.update({f"copy{i}": "${l10}" for i in range(MAX_TOTAL_LOOKUPS // 2**11 + 1)})
    _, problems = resolve_interpolations(tree, "bc")
    assert problems and f"more than {MAX_TOTAL_LOOKUPS} lookups" in problems[0].message


def test_a_long_chain_is_refused_naming_its_length():
    tree: dict = {f"k{i}": f"${{k{i + 1}}}" for i in range(MAX_CHAIN + 5)}
    tree[f"k{MAX_CHAIN + 5}"] = 1
    _, problems = resolve_interpolations(tree, "bc")
    assert problems and f"more than {MAX_CHAIN} interpolations" in problems[0].message
    assert problems[-1].message.startswith("and ") or len(problems) <= MAX_NAMED


def test_a_chain_within_the_budget_resolves():
    tree: dict = {f"k{i}": f"${{k{i + 1}}}" for i in range(MAX_CHAIN - 1)}
    tree[f"k{MAX_CHAIN - 1}"] = 7
    resolved, problems = resolve_interpolations(tree, "bc")
    assert problems == [] and resolved["k0"] == 7
    resolved, problems = resolve_interpolations(doubling(10), "bc")
    assert problems == [] and resolved["l9"] == "xx" * 2**9


def test_relative_list_and_select_references_are_counted_not_refused():
    tree = {
        "data": {"n": 10, "b": {"c": "${..n}", "d": "${oc.select:data.nope,5}"}},
        "whole": "${data.b}",
        "items": [1, "${items.0}", "${items[0]}"],
    }
    resolved, problems = resolve_interpolations(tree, "")
    assert problems == []
    assert resolved["whole"] == {"c": 10, "d": 5} and resolved["items"] == [1, 1, 1]
