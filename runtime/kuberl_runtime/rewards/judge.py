"""A generative reward model (LLM judge) served by a vLLM engine on this rank.

verl 0.9.1's reward loop calls the user's `custom_reward_function` with two more keyword
arguments, `reward_router_address` (host:port of an OpenAI-compatible server of the reward model)
and `reward_model_tokenizer`; the function writes the judge prompt from its template, posts
`/v1/chat/completions` and parses the score from the reply. kuberl keeps that contract, so verl's
judge functions run as written:

* `JudgeServer` listens on 127.0.0.1 (an ephemeral port) and answers `/v1/chat/completions`;
* while the reward function runs (in a helper thread), the calling thread collects its requests
  into batches (up to `max_num_seqs`; see `QUIET_S`) and runs each through the engine in one
  `generate` call, so vLLM stays on the thread that built it;
* each request is sampled with its own seed (the request's `seed`, else a hash of its messages),
  so a batch's order does not change its results.

Placement is colocated: the engine shares the rank's device with the trainer. Where the platform
has sleep mode (GPU) and `free_cache_engine` is set, it sleeps (level 1: weights to host, KV
cache freed) outside reward passes, as verl's reward loop does; CPU vLLM has no sleep mode and the
judge stays resident.
"""

from __future__ import annotations

import inspect
import logging
import os
import queue
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from kuberl_api.plan.reward_judge import JudgePlan
from kuberl_api.plan.sections import RewardFunctionPlan
from kuberl_runtime.rewards.judge_http import ChatRequest, JudgeServer
from kuberl_runtime.rewards.manager import RewardManager, reward_manager_for

logger = logging.getLogger(__name__)

SYNC_WORKERS = 32
"""Threads that run a plain (not async) per-response judge function side by side."""
POLL_S = 0.05
"""How often the batcher looks for a first request while the reward function runs."""
QUIET_S = 5.0
"""A batch is run once it holds as many requests as responses are left to judge (one request
per response, as verl's judge functions send), or when no request came for this long (a
function that judges only some responses, or sends several per response)."""
# Request fields passed to vLLM's SamplingParams as they are (OpenAI names that vLLM shares).
PASSTHROUGH = (
    "top_k",
    "min_p",
    "stop",
    "stop_token_ids",
    "min_tokens",
    "allowed_token_ids",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
)


@dataclass
class JudgeEngine:
    """The engine, its tokenizer and how to sample one chat request."""

    llm: Any
    sampling_cls: Any
    tokenizer: Any
    max_model_len: int
    sleeps: bool

    def complete(self, requests: Sequence[ChatRequest]) -> list[str]:
        prompts = [self._prompt_ids(r) for r in requests]
        params = [self._sampling(r, len(ids)) for r, ids in zip(requests, prompts, strict=True)]
        outputs = self.llm.generate(
            [{"prompt_token_ids": ids} for ids in prompts], sampling_params=params, use_tqdm=False
        )
        return [out.outputs[0].text for out in outputs]

    def wake_up(self) -> None:
        if self.sleeps:
            self.llm.wake_up()

    def sleep(self) -> None:
        if self.sleeps:
            self.llm.sleep(level=1)

    def _prompt_ids(self, request: ChatRequest) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            request.messages, add_generation_prompt=True, tokenize=False
        )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _sampling(self, request: ChatRequest, prompt_len: int) -> Any:
        body = request.body
        room = self.max_model_len - prompt_len
        seed = body.get("seed")
        if seed is None:
            seed = zlib.crc32(repr(request.messages).encode())
        kwargs = {
            "n": 1,
            "temperature": float(body.get("temperature", 1.0)),
            "top_p": float(body.get("top_p", 1.0)),
            "max_tokens": min(int(body.get("max_tokens") or room), room),
            "seed": int(seed),
            **{k: body[k] for k in PASSTHROUGH if body.get(k) is not None},
        }
        return self.sampling_cls(**kwargs)


class JudgeService:
    """The server plus the batcher that feeds the engine from the calling thread."""

    def __init__(self, engine: JudgeEngine, max_batch: int) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self.pending: queue.Queue[tuple[ChatRequest, Future[str]]] = queue.Queue()
        self.server = JudgeServer(self.pending)
        self.left = self.concurrency = 0

    @property
    def address(self) -> str:
        return self.server.address

    def run(self, work: Callable[[], Any], expected: int, concurrency: int = 0) -> Any:
        """`work()` in a helper thread while this thread serves its judge requests (about
        `expected` of them: the responses it scores; at most `concurrency` at once, 0: all)."""
        result: dict[str, Any] = {}
        self.left, self.concurrency = expected, concurrency or expected

        def target() -> None:
            try:
                result["value"] = work()
            except BaseException as err:  # re-raised on the calling thread
                result["error"] = err

        thread = threading.Thread(target=target, name="reward-function", daemon=True)
        self.engine.wake_up()
        try:
            thread.start()
            while thread.is_alive() or not self.pending.empty():
                self._serve_one_batch()
            thread.join()
        finally:
            self.engine.sleep()
        if "error" in result:
            raise result["error"]
        return result["value"]

    def _serve_one_batch(self) -> None:
        try:
            batch = [self.pending.get(timeout=POLL_S)]
        except queue.Empty:
            return
        while len(batch) < min(self.max_batch, max(self.left, 1), self.concurrency):
            try:
                batch.append(self.pending.get(timeout=QUIET_S))
            except queue.Empty:
                break
        self.left -= len(batch)
        logger.info("judge batch of %d requests", len(batch))
        try:
            texts = self.engine.complete([request for request, _ in batch])
        except Exception as err:
            for _, future in batch:
                future.set_exception(err)
            return
        for (_, future), text in zip(batch, texts, strict=True):
            future.set_result(text)

    def close(self) -> None:
        """Before the process group is destroyed: vLLM's teardown needs it."""
        from kuberl_runtime.rollout.vllm_engine import close_engine

        self.server.close()
        close_engine(self.engine.llm)


def build_judge(plan: JudgePlan, trust_remote_code: bool) -> JudgeService:
    """One judge engine on this rank (all ranks call it together)."""
    import vllm
    from transformers import AutoConfig, AutoTokenizer

    from kuberl_runtime.rollout.vllm_engine import build_llm, engine_platform, kv_cache_bytes

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    platform = engine_platform()
    sleeps = plan.free_cache_engine and platform.sleep_mode
    kwargs = judge_engine_kwargs(plan, trust_remote_code, sleeps)
    if platform.device_type == "cpu" and "kv_cache_memory_bytes" not in kwargs:
        config = AutoConfig.from_pretrained(plan.model_path, trust_remote_code=trust_remote_code)
        kwargs["kv_cache_memory_bytes"] = kv_cache_bytes(plan, config.get_text_config())  # type: ignore[arg-type]
    if plan.free_cache_engine and not sleeps:
        logger.info("judge: no sleep mode on %s, the engine stays resident", platform.device_type)
    logger.info("judge vLLM engine (%s): %s", platform.device_type, kwargs)
    engine = JudgeEngine(
        llm=build_llm(vllm.LLM, kwargs),
        sampling_cls=vllm.SamplingParams,
        tokenizer=AutoTokenizer.from_pretrained(
            plan.model_path, trust_remote_code=trust_remote_code
        ),
        max_model_len=plan.max_model_len,
        sleeps=sleeps,
    )
    engine.sleep()
    return JudgeService(engine, plan.max_num_seqs)


def judge_engine_kwargs(plan: JudgePlan, trust_remote_code: bool, sleeps: bool) -> dict[str, Any]:
    """`vllm.LLM(**kwargs)` for the judge (`engine_kwargs.vllm` wins)."""
    return {
        "model": plan.model_path,
        "tensor_parallel_size": plan.tensor_model_parallel_size,
        "distributed_executor_backend": "external_launcher",
        "dtype": plan.dtype,
        "enforce_eager": plan.enforce_eager,
        "gpu_memory_utilization": plan.gpu_memory_utilization,
        "max_model_len": plan.max_model_len,
        "max_num_batched_tokens": plan.max_num_batched_tokens,
        "max_num_seqs": plan.max_num_seqs,
        "enable_chunked_prefill": plan.enable_chunked_prefill,
        "enable_prefix_caching": plan.enable_prefix_caching,
        "enable_sleep_mode": sleeps,
        "load_format": plan.load_format,
        "disable_log_stats": plan.disable_log_stats,
        "trust_remote_code": trust_remote_code,
        "seed": 0,
        **plan.engine_kwargs,
    }


@dataclass(frozen=True)
class JudgedFunction:
    """A reward function whose calls run while `service` answers its judge requests."""

    inner: Any
    service: JudgeService

    @property
    def description(self) -> str:
        return f"{self.inner.description} (judge at {self.service.address})"

    @property
    def batch(self) -> bool:
        return bool(self.inner.batch)

    def __call__(self, *columns: Sequence[Any]) -> list[Any]:
        """Each rank judges every world_size-th row (all ranks score the same batch) and the
        results are gathered, so no response is judged twice."""
        world, rank = _world()
        if world == 1:
            return self._judge(columns)
        mine = self._judge(tuple(list(column[rank::world]) for column in columns))
        parts: list[Any] = [None] * world
        dist.all_gather_object(parts, mine)
        results: list[Any] = [None] * len(columns[0])
        for owner, part in enumerate(parts):
            results[owner::world] = part
        return results

    def _judge(self, columns: Sequence[Sequence[Any]]) -> list[Any]:
        rows = len(columns[0])
        if not rows:
            return []
        if self.inner.batch or inspect.iscoroutinefunction(self.inner.fn):
            return list(self.service.run(lambda: self.inner(*columns), rows))
        # A plain function blocks on each request: run the rows side by side, as verl's reward
        # loop runs it in its event loop's thread pool.
        workers = min(SYNC_WORKERS, rows)

        def work() -> list[Any]:
            with ThreadPoolExecutor(workers) as pool:
                parts = pool.map(lambda row: self.inner(*[[c[row]] for c in columns]), range(rows))
                return [result for part in parts for result in part]

        return list(self.service.run(work, rows, workers))

    def close(self) -> None:
        self.service.close()


def _world() -> tuple[int, int]:
    if not dist.is_initialized():
        return 1, 0
    return dist.get_world_size(), dist.get_rank()


def judged_reward_manager(
    plan: RewardFunctionPlan, service: JudgeService, experiment_name: str = ""
) -> RewardManager:
    """The run's manager whose function also gets verl's `reward_router_address` and
    `reward_model_tokenizer` (the judge's)."""
    kwargs = {
        **plan.reward_kwargs,
        "reward_router_address": service.address,
        "reward_model_tokenizer": service.engine.tokenizer,
    }
    manager = reward_manager_for(plan.model_copy(update={"reward_kwargs": kwargs}), experiment_name)
    manager.reward_fn = JudgedFunction(manager.reward_fn, service)  # type: ignore[assignment]
    return manager
