"""verl's `prime` and `gdpo` reward managers (verl 0.9.1).

`prime` (`verl/workers/reward_manager/prime.py`, PRIME-RL's manager): every response is scored
in a pool of processes, the function called positionally as `fn(data_source, solution_str,
ground_truth, extra_info, **reward_kwargs)` with a 300 s limit per call; a call that raises or
runs out of time scores 0.0, a number is taken as it is, and any other result is read as a
sequence whose first element is the score (verl's `float(result[0])`). No extra info is returned.
verl 0.9.1 keeps it in its legacy registry only: its own trainer's reward loop does not find it.

`gdpo` (`verl/experimental/reward_loop/reward_manager/gdpo.py`): the naive manager whose
`extra_info` also holds `experiment_name` (`trainer.experiment_name`), and whose numeric results
are recorded as `acc` too, which GDPO's per-key advantages read (`algorithm.gdpo_reward_keys`).
"""

from __future__ import annotations

import logging
import multiprocessing
import numbers
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

logger = logging.getLogger(__name__)

PRIME_PROCESSES = 64
PRIME_TIMEOUT_S = 300.0

_WORKER_FN: Callable[..., Any] | None = None


def _set_worker_fn(fn: Callable[..., Any]) -> None:
    global _WORKER_FN
    _WORKER_FN = fn


def _call_worker_fn(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    assert _WORKER_FN is not None
    return _WORKER_FN(*args, **kwargs)


def prime_scores(
    fn: Callable[..., Any],
    reward_kwargs: Mapping[str, Any],
    columns: tuple[Sequence[Any], ...],
    processes: int = PRIME_PROCESSES,
    timeout: float = PRIME_TIMEOUT_S,
) -> list[float]:
    """`columns`: data sources, solution strings, ground truths, extra infos (one per row).

    The pool is forked (the function need not be importable by name in the children)."""
    rows = list(zip(*columns, strict=True))
    if not rows:
        return []
    context = multiprocessing.get_context("fork")
    workers = max(1, min(processes, len(rows)))
    with ProcessPoolExecutor(workers, context, initializer=_set_worker_fn, initargs=(fn,)) as pool:
        futures = [pool.submit(_call_worker_fn, row, dict(reward_kwargs)) for row in rows]
        results = [_result(future, timeout, i) for i, future in enumerate(futures)]
    return [_prime_score(result) for result in results]


def _result(future: Any, timeout: float, row: int) -> Any:
    try:
        return future.result(timeout=timeout)
    except FutureTimeout:
        logger.warning("prime reward: response %d timed out after %.0f s: scored 0", row, timeout)
    except Exception as err:
        logger.warning("prime reward: response %d failed (%r): scored 0", row, err)
    return None


def _prime_score(result: Any) -> float:
    if result is None:
        return 0.0
    if isinstance(result, numbers.Real):
        return float(result)
    return float(result[0])


def gdpo_extra_infos(
    extra_infos: Sequence[Mapping[str, Any] | None], experiment_name: str
) -> list[dict[str, Any]]:
    """Each row's extra_info with `experiment_name` set, as verl's gdpo manager passes it."""
    return [{**(info or {}), "experiment_name": experiment_name} for info in extra_infos]
