"""verl's validation metric names: val-core for acc (or reward), val-aux for the rest."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kuberl_runtime.trainer.batch import Batch
from kuberl_runtime.trainer.validation import validation_metrics


def batch_of(sources: list[str], uids: list[str]) -> Batch:
    samples = [SimpleNamespace(data_source=s) for s in sources]
    return Batch({}, {"sample": samples, "uid": uids})


def test_reward_is_core_without_acc():
    batch = batch_of(["a", "a", "a", "a"], ["p0", "p0", "p1", "p1"])
    metrics = validation_metrics(batch, [1.0, 0.0, 1.0, 1.0], {}, k=2)
    assert metrics["val-core/a/reward/mean@2"] == pytest.approx(0.75)
    assert metrics["val-core/a/reward/std@2"] == pytest.approx(0.25)


def test_acc_is_core_and_reward_becomes_aux_per_data_source():
    batch = batch_of(["a", "b"], ["p0", "p1"])
    metrics = validation_metrics(batch, [0.5, 1.0], {"acc": [0, 1], "pred": ["3", "4"]}, k=1)
    assert metrics == {
        "val-aux/a/reward/mean@1": 0.5,
        "val-aux/b/reward/mean@1": 1.0,
        "val-core/a/acc/mean@1": 0.0,
        "val-core/b/acc/mean@1": 1.0,
    }
