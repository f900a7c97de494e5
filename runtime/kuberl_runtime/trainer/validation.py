"""Validation: generate with `rollout.val_kwargs`, score, and report verl's `val-core/...` keys.

Per data source and variable (`reward`, plus numeric keys the scorer returns): `mean@k` over the
k samples of each prompt, averaged over prompts, and `std@k` when k > 1. The "core" variable is
`acc` when the scorer returns it, else `reward`. (verl's bootstrap best@n/worst@n/maj@n are not
reported yet.)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kuberl_runtime.trainer.batch import Batch


def validation_metrics(
    batch: Batch, scores: Sequence[float], extra: Mapping[str, Sequence[Any]], k: int
) -> dict[str, float]:
    variables: dict[str, Sequence[Any]] = {"reward": scores}
    for key, values in extra.items():
        if all(isinstance(v, int | float | bool) for v in values):
            variables[key] = values
    core_var = "acc" if "acc" in variables else "reward"
    sources = [sample.data_source for sample in batch.objects["sample"]]
    uids = batch.objects["uid"]
    metrics: dict[str, float] = {}
    for var, values in variables.items():
        grouped: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for source, uid, value in zip(sources, uids, values, strict=True):
            grouped[source][uid].append(float(value))
        section = "val-core" if var == core_var else "val-aux"
        for source, per_prompt in grouped.items():
            prefix = f"{section}/{source}/{var}"
            metrics[f"{prefix}/mean@{k}"] = float(
                np.mean([np.mean(v) for v in per_prompt.values()])
            )
            if k > 1:
                metrics[f"{prefix}/std@{k}"] = float(
                    np.mean([np.std(v) for v in per_prompt.values()])
                )
    return metrics
