"""The reward manager: decoded responses + sample metadata → one score per response.

verl 0.9.1's `naive` and `batch` managers (the scoring function called per response or once per
batch), `dapo` (naive plus DAPO's overlong penalty on the response length, `rewards/dapo.py`),
`prime` and `gdpo` (`rewards/prime.py`).
Placing each score at the last valid response token is the trainer's job (see
`placement.place_scores`); this module only decides the numbers.
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from kuberl_api.plan.sections import RewardFunctionPlan
from kuberl_runtime.rewards.dapo import Dapo, OverlongBuffer, dapo_scores
from kuberl_runtime.rewards.errors import RewardError
from kuberl_runtime.rewards.function import (
    RewardFunction,
    default_reward_function,
    load_custom_reward_function,
)
from kuberl_runtime.rewards.output import RewardOutput
from kuberl_runtime.rewards.prime import gdpo_extra_infos, prime_scores

logger = logging.getLogger(__name__)


class RewardSample(Protocol):
    """What scoring needs from a prompt sample (`kuberl_runtime.data.PromptSample` fits)."""

    data_source: str
    ground_truth: str | None
    extra_info: dict[str, Any]


class RewardManager:
    """verl's `naive` manager (one call per response) or `batch` (one call per batch), and with
    `dapo` settings verl's `dapo` manager (naive plus the overlong penalty)."""

    def __init__(
        self,
        reward_fn: RewardFunction | None = None,
        dapo: Dapo | None = None,
        mode: str = "naive",
        experiment_name: str = "",
    ) -> None:
        """`mode`: `prime` or `gdpo` for those managers (`experiment_name`: gdpo's), else naive
        (`batch` is the function's form, `dapo` the `dapo` settings)."""
        self.reward_fn = reward_fn or default_reward_function()
        self.dapo = dapo
        self.mode = mode
        self.experiment_name = experiment_name
        if dapo is not None:
            dapo.buffer.check(dapo.max_resp_len)

    def score(
        self,
        solution_strs: Sequence[str],
        data_sources: Sequence[str],
        ground_truths: Sequence[Any],
        extra_infos: Sequence[Mapping[str, Any] | None] | None = None,
        response_lengths: Sequence[int] | None = None,
    ) -> RewardOutput:
        """`response_lengths`: valid tokens per response (the dapo manager's penalty needs them)."""
        if extra_infos is None:
            extra_infos = [None] * len(solution_strs)
        lengths = {len(solution_strs), len(data_sources), len(ground_truths), len(extra_infos)}
        if len(lengths) != 1:
            raise ValueError(f"reward inputs differ in length: {sorted(lengths)}")
        if self.mode == "prime":
            fn = self.reward_fn
            columns = (data_sources, solution_strs, ground_truths, extra_infos)
            return RewardOutput(prime_scores(fn.fn, fn.reward_kwargs, columns), {})
        if self.mode == "gdpo":
            extra_infos = gdpo_extra_infos(extra_infos, self.experiment_name)
        results = self.reward_fn(data_sources, solution_strs, ground_truths, extra_infos)
        output = _collect(results, self.reward_fn.description)
        if self.mode == "gdpo":
            return _with_acc(output, results)
        if self.dapo is None:
            return output
        assert response_lengths is not None, "the dapo reward manager needs response lengths"
        numeric = [not isinstance(r, Mapping) for r in results]
        return dapo_scores(
            output, numeric, response_lengths, self.dapo.buffer, self.dapo.max_resp_len
        )

    def close(self) -> None:
        """Release what the scoring function holds (a generative reward model's engine)."""
        close = getattr(self.reward_fn, "close", None)
        if close is not None:
            close()

    def score_samples(
        self,
        samples: Sequence[RewardSample],
        solution_strs: Sequence[str],
        response_lengths: Sequence[int] | None = None,
    ) -> RewardOutput:
        """Score responses to `samples` (already repeated `rollout.n` times, in the same order)."""
        return self.score(
            solution_strs,
            [s.data_source for s in samples],
            [s.ground_truth for s in samples],
            [s.extra_info for s in samples],
            response_lengths,
        )


def build_reward_manager(
    custom_reward_path: str | Path | None = None,
    custom_reward_name: str = "compute_score",
    reward_kwargs: Mapping[str, Any] | None = None,
    batch: bool | None = None,
    dapo: Dapo | None = None,
) -> RewardManager:
    """From `custom_reward_function.{path,name,reward_kwargs}`; no path ⇒ built-in scorers."""
    if custom_reward_path is None:
        # Without a path, reward_kwargs configure the built-in scorers (only `lenient`).
        return RewardManager(default_reward_function(reward_kwargs), dapo)
    reward_fn = load_custom_reward_function(
        custom_reward_path, custom_reward_name, reward_kwargs, batch
    )
    logger.info(
        "using custom reward function %s (batch=%s)", reward_fn.description, reward_fn.batch
    )
    return RewardManager(reward_fn, dapo)


def reward_manager_for(plan: RewardFunctionPlan, experiment_name: str = "") -> RewardManager:
    """The run's manager: `reward_model.reward_manager` with its reward_kwargs, and the
    `custom_reward_function` it calls (`experiment_name`: the gdpo manager passes it on)."""
    dapo = None
    if plan.reward_manager == "dapo":
        b = plan.overlong_buffer
        buffer = OverlongBuffer(b.enable, b.len, b.penalty_factor, b.log)
        dapo = Dapo(buffer, plan.max_resp_len or None)
    manager = build_reward_manager(
        plan.path or None,
        plan.name,
        plan.reward_kwargs,
        batch=True if plan.reward_manager == "batch" else None,
        dapo=dapo,
    )
    if plan.reward_manager in ("prime", "gdpo"):
        manager.mode, manager.experiment_name = plan.reward_manager, experiment_name
    return manager


def decode_responses(tokenizer: Any, response_ids: Sequence[Sequence[int]]) -> list[str]:
    """Valid response ids → text as the scorer sees it (special tokens such as EOS dropped)."""
    return list(
        tokenizer.batch_decode([list(ids) for ids in response_ids], skip_special_tokens=True)
    )


def _collect(results: Sequence[Any], description: str) -> RewardOutput:
    scores: list[float] = []
    extras: list[Mapping[str, Any]] = []
    for i, result in enumerate(results):
        score, extra = _split_result(result, description, i)
        scores.append(score)
        extras.append(extra)
    keys = list(dict.fromkeys(key for extra in extras for key in extra))
    return RewardOutput(scores, {key: [extra.get(key) for extra in extras] for key in keys})


def _split_result(result: Any, description: str, i: int) -> tuple[float, Mapping[str, Any]]:
    extra: Mapping[str, Any] = {}
    if isinstance(result, Mapping):
        if "score" not in result:
            raise RewardError(
                f"reward function {description} returned a dict without 'score' for response {i} "
                f"(keys: {sorted(result)}); return a float or a dict with a 'score' key"
            )
        extra = {k: v for k, v in result.items() if k != "score"}
        result = result["score"]
    if not isinstance(result, numbers.Real):
        raise RewardError(
            f"reward function {description} returned {result!r} ({type(result).__name__}) for "
            f"response {i}; return a number or a dict with a numeric 'score'"
        )
    return float(result), extra


def _with_acc(output: RewardOutput, results: Sequence[Any]) -> RewardOutput:
    """verl's gdpo (and naive) managers record a numeric result as `acc` as well."""
    numeric = [not isinstance(r, Mapping) for r in results]
    if not any(numeric):
        return output
    acc = output.extra_info.get("acc", [None] * len(results))
    merged = [s if n else a for s, n, a in zip(output.scores, numeric, acc, strict=True)]
    return RewardOutput(output.scores, {**output.extra_info, "acc": merged})
