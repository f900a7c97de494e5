"""Reward functions: the built-in dispatcher or a user's `custom_reward_function`.

A user's function is found by `custom_reward_function.path` (a Python file) and `.name`
(default `compute_score`) and is called with keyword arguments plus `reward_kwargs`:

* per sample — `fn(data_source=, solution_str=, ground_truth=, extra_info=, **reward_kwargs)`,
  returning a float (bool/int are converted) or a dict holding `score` and any extra keys;
* batch — `fn(data_sources=, solution_strs=, ground_truths=, extra_infos=, **reward_kwargs)`
  with lists, returning a list of the same results. This is verl's `batch` reward manager
  convention, so existing verl batch functions work unchanged. A function is a batch function
  when its parameters use the plural names (or when `batch=True` is passed explicitly, e.g. from
  `reward_manager.name=batch`).

`async def` functions work in both forms; per-sample coroutines run concurrently.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kuberl_api.plan.sections import BUILTIN_REWARD_KWARGS
from kuberl_runtime.rewards.errors import RewardError
from kuberl_runtime.rewards.registry import default_compute_score

SAMPLE_ARGS = ("data_source", "solution_str", "ground_truth", "extra_info")
BATCH_ARGS = ("data_sources", "solution_strs", "ground_truths", "extra_infos")


@dataclass(frozen=True)
class RewardFunction:
    """A scorer plus how to call it; `__call__` always takes and returns lists."""

    fn: Callable[..., Any]
    batch: bool = False
    reward_kwargs: Mapping[str, Any] = field(default_factory=dict)
    description: str = "default_compute_score"

    def __call__(
        self,
        data_sources: Sequence[str],
        solution_strs: Sequence[str],
        ground_truths: Sequence[Any],
        extra_infos: Sequence[Mapping[str, Any] | None],
    ) -> list[Any]:
        if self.batch:
            return self._call_batch(data_sources, solution_strs, ground_truths, extra_infos)
        calls = [
            dict(zip(SAMPLE_ARGS, args, strict=True))
            for args in zip(data_sources, solution_strs, ground_truths, extra_infos, strict=True)
        ]
        if inspect.iscoroutinefunction(self.fn):
            return asyncio.run(_gather(self.fn, calls, self.reward_kwargs))
        return [self.fn(**call, **self.reward_kwargs) for call in calls]

    def _call_batch(self, *columns: Sequence[Any]) -> list[Any]:
        kwargs = {name: list(col) for name, col in zip(BATCH_ARGS, columns, strict=True)}
        results = self.fn(**kwargs, **self.reward_kwargs)
        if inspect.isawaitable(results):
            results = asyncio.run(_await(results))
        results = list(results)
        if len(results) != len(columns[0]):
            raise RewardError(
                f"batch reward function {self.description} returned {len(results)} results "
                f"for {len(columns[0])} responses; return one score per response"
            )
        return results


def default_reward_function(reward_kwargs: Mapping[str, Any] | None = None) -> RewardFunction:
    """The built-in scorers; `reward_kwargs` may only hold `lenient` (a bool)."""
    reward_kwargs = dict(reward_kwargs or {})
    unknown = sorted(set(reward_kwargs) - set(BUILTIN_REWARD_KWARGS))
    if unknown:
        raise RewardError(
            f"custom_reward_function.reward_kwargs {unknown} have no meaning for the built-in "
            f"scorers, which accept only {list(BUILTIN_REWARD_KWARGS)}; remove them, or set "
            "custom_reward_function.path to a function that takes them"
        )
    if not isinstance(reward_kwargs.get("lenient", False), bool):
        raise RewardError(
            "custom_reward_function.reward_kwargs.lenient must be true or false, got "
            f"{reward_kwargs['lenient']!r}"
        )
    return RewardFunction(default_compute_score, reward_kwargs=reward_kwargs)


def load_custom_reward_function(
    path: str | Path,
    name: str = "compute_score",
    reward_kwargs: Mapping[str, Any] | None = None,
    batch: bool | None = None,
) -> RewardFunction:
    """Import `name` from the Python file at `path` and check it can be called as documented."""
    reward_kwargs = dict(reward_kwargs or {})
    fn = getattr(_import_file(Path(path).expanduser()), name, None)
    description = f"{name!r} in {path}"
    if fn is None or not callable(fn):
        raise RewardError(
            f"custom_reward_function.path {path} defines no function {name!r}; "
            "set custom_reward_function.name to the function to call"
        )
    is_batch = _choose_form(fn, batch, description)
    _check_reward_kwargs(fn, reward_kwargs, is_batch, description)
    return RewardFunction(fn, is_batch, reward_kwargs, description)


def _import_file(file: Path) -> Any:
    if not file.is_file():
        raise RewardError(f"custom_reward_function.path {file} does not exist")
    # A unique module name per file so two reward files named the same never collide.
    digest = hashlib.sha1(str(file.resolve()).encode()).hexdigest()[:10]
    spec = importlib.util.spec_from_file_location(f"kuberl_custom_reward_{digest}", file)
    if spec is None or spec.loader is None:
        raise RewardError(f"custom_reward_function.path {file} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise RewardError(f"importing custom_reward_function.path {file} failed: {err!r}") from err
    return module


def _choose_form(fn: Callable[..., Any], batch: bool | None, description: str) -> bool:
    params = inspect.signature(fn).parameters
    if batch is None:
        batch = all(name in params for name in BATCH_ARGS)
    wanted = BATCH_ARGS if batch else SAMPLE_ARGS
    if not _accepts_keywords(fn, wanted):
        raise RewardError(
            f"custom reward function {description} has signature {inspect.signature(fn)}; it must "
            f"accept the keyword arguments {', '.join(SAMPLE_ARGS)} (one response per call) or "
            f"{', '.join(BATCH_ARGS)} (lists, batch form)"
        )
    return batch


def _check_reward_kwargs(
    fn: Callable[..., Any], reward_kwargs: Mapping[str, Any], is_batch: bool, description: str
) -> None:
    if not _accepts_keywords(fn, tuple(reward_kwargs)):
        raise RewardError(
            f"custom reward function {description} does not accept reward_kwargs "
            f"{sorted(reward_kwargs)}; add them as parameters (or **kwargs)"
        )
    passed = {*(BATCH_ARGS if is_batch else SAMPLE_ARGS), *reward_kwargs}
    unfilled = [
        p.name
        for p in inspect.signature(fn).parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        and p.name not in passed
    ]
    if unfilled:
        raise RewardError(
            f"custom reward function {description} requires {unfilled}, which the reward manager "
            "never passes; give them defaults or set them in custom_reward_function.reward_kwargs"
        )


def _accepts_keywords(fn: Callable[..., Any], names: Sequence[str]) -> bool:
    params = inspect.signature(fn).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return True
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = {p.name for p in params if p.kind in keyword_kinds}
    return set(names) <= accepted


async def _gather(
    fn: Callable[..., Any], calls: list[dict[str, Any]], reward_kwargs: Mapping[str, Any]
) -> list[Any]:
    return list(await asyncio.gather(*(fn(**call, **reward_kwargs) for call in calls)))


async def _await(awaitable: Any) -> Any:
    return await awaitable
