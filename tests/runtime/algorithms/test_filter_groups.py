"""DAPO's group filter against a hand-computed case and verl's rule as a property.

verl 0.9.1 (V1 replay buffer) evicts a group when it has more than one response and
`float(np.std(values)) == 0.0`; its DAPO trainer (verl 0.9 docs/algo/dapo.md) keeps a group when
`np.std(values) > 0` or it holds one response. verl's code is inline in its trainer (no
importable function), hence a hand-computed case and the rule as a hypothesis property.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kuberl_runtime.algorithms.filter_groups import filter_groups, metric_values


def test_hand_computed_case():
    # a: all correct, b: mixed, c: all wrong, d: one response, e: mixed scores
    uids = ["a", "a", "a", "b", "b", "b", "c", "c", "c", "d", "e", "e", "e"]
    acc = [1, 1, 1, 0, 1, 0, 0, 0, 0, 1, 0.5, 0.5, 0.25]
    result = filter_groups(uids, acc)
    assert result.kept_rows == [3, 4, 5, 9, 10, 11, 12]
    assert (result.kept_groups, result.groups) == (3, 5)


def test_interleaved_rows_keep_their_order():
    result = filter_groups(["x", "y", "x", "y"], [1.0, 2.0, 1.0, 3.0])
    assert result.kept_rows == [1, 3]
    assert (result.kept_groups, result.groups) == (1, 2)


def test_rounding_as_numpy_std_sees_it():
    # np.std([0.1] * 3) is 1.4e-17, not 0: verl keeps this group, and so does kuberl.
    assert float(np.std([0.1] * 3)) > 0
    assert filter_groups(["g"] * 3, [0.1] * 3).kept_rows == [0, 1, 2]
    assert filter_groups(["g"] * 3, [0.5] * 3).kept_rows == []


def test_metric_values_from_scores_or_extra_info():
    scores = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.5, 0.0]])
    for metric in ("reward", "seq_reward", "seq_final_reward"):
        assert metric_values(metric, scores, {}) == [1.0, 0.5]
    assert metric_values("acc", scores, {"acc": [True, False]}) == [1.0, 0.0]


def test_a_missing_or_non_numeric_metric_names_the_key_and_the_fix():
    scores = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"metric='acc'.*\['score'\].*seq_reward"):
        metric_values("acc", scores, {"score": [1.0, 0.0]})
    with pytest.raises(ValueError, match=r"metric='pred' holds non-numeric"):
        metric_values("pred", scores, {"pred": ["x + 1", "13"]})


groups = st.lists(
    st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=1, max_size=5),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(groups=groups, seed=st.integers(0, 2**16))
def test_verl_rule_on_shuffled_rows(groups, seed):
    rows = [(f"u{g}", v) for g, values in enumerate(groups) for v in values]
    order = np.random.default_rng(seed).permutation(len(rows))
    uids = [rows[i][0] for i in order]
    values = [rows[i][1] for i in order]
    result = filter_groups(uids, values)
    by_uid: dict[str, list[float]] = {}
    for uid, value in zip(uids, values, strict=True):
        by_uid.setdefault(uid, []).append(value)
    # verl 0.9.1: evicted iff more than one response and float(np.std(values)) == 0.0
    evicted = {u for u, vals in by_uid.items() if len(vals) > 1 and float(np.std(vals)) == 0.0}
    assert result.kept_rows == [r for r, u in enumerate(uids) if u not in evicted]
    assert result.groups == len(by_uid) and result.kept_groups == len(by_uid) - len(evicted)
    # whole groups only: a kept group keeps all of its rows
    kept_uids = {uids[r] for r in result.kept_rows}
    assert sum(len(by_uid[u]) for u in kept_uids) == len(result.kept_rows)
