"""A stand-in for the `vllm` package: exactly the API surface `kuberl_runtime.rollout.vllm` calls.

Pinned version: vLLM 0.32.0 (images/versions.env VLLM_VERSION). vLLM cannot be installed here, so
the surface below was read from upstream sources (vllm-project/vllm, as stored in the code index):

* `vllm/sampling_params.py` (commit 00388f6573ccfcffad607b8c9ecdf341a4669ceb): `SamplingParams`
  is a msgspec struct — unknown keyword arguments raise; `top_k` 0 or -1 disables; fields below.
* `vllm/engine/arg_utils.py` (`EngineArgs` dataclass,
  commit 99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b) — `LLM(model, **kwargs)` forwards kwargs
  to `EngineArgs(...)`, so an unknown name raises TypeError; `ENGINE_ARGS` lists the names
  kuberl passes.
* `vllm/entrypoints/llm.py` (commit 0012cf691b7e69423244d2b1405f4b6832156e19 and the current
  `LLM.sleep(level=1, mode="abort")` / `wake_up(tags: list[str] | None)`, tags "weights",
  "kv_cache", "scheduling"): `generate(prompts, sampling_params=None, *, use_tqdm=True,
  lora_request=None, priority=None) -> list[RequestOutput]` in input order;
  `collective_rpc(method, timeout=None, args=(), kwargs=None) -> list` calls a callable method as
  `method(worker, *args, **kwargs)` on each worker (one, in-process, with the external launcher).
* `vllm/v1/worker/gpu_worker.py` (0.32.0, the CPU worker inherits it): `collective_rpc(
  "reload_weights", kwargs={"weights_iterator": ..., "is_checkpoint_format": True})` reloads in
  place from (HF name, tensor) pairs; `LLM.reset_prefix_cache()` drops KV of the old weights.
* `vllm/platforms`: `current_platform.device_type`, `is_sleep_mode_available()` (a GPU here; the
  real CPU engine is exercised by tests/runtime/rollout/vllm_cpu/).

What the fake enforces beyond signatures is vLLM's behaviour that the rollout relies on: weights
must be loaded before generating (load_format="dummy" starts random), nothing runs while asleep,
sleep needs enable_sleep_mode, level 2 discards weights, generation stops after a stop token
unless ignore_eos, and outputs keep the input order. Token choice is a hash of (seed, prompt,
weights), so equal inputs give equal outputs and a weight change changes them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

__version__ = "0.32.0"

ENGINE_ARGS = frozenset(
    {
        "model", "tokenizer", "skip_tokenizer_init", "trust_remote_code", "tensor_parallel_size",
        "pipeline_parallel_size", "data_parallel_size", "distributed_executor_backend", "dtype",
        "seed", "gpu_memory_utilization", "enforce_eager", "disable_custom_all_reduce",
        "max_model_len", "max_num_batched_tokens", "max_num_seqs", "enable_chunked_prefill",
        "enable_prefix_caching", "enable_sleep_mode", "load_format", "disable_log_stats",
        "hf_overrides", "enable_lora", "max_loras", "max_lora_rank", "quantization",
        "enable_expert_parallel", "cudagraph_capture_sizes", "compilation_config",
        "cpu_offload_gb", "kv_cache_memory_bytes", "worker_extension_cls", "logprobs_mode",
    }
)  # fmt: skip
WAKE_TAGS = frozenset({"weights", "kv_cache", "scheduling"})


class _Platform:
    device_type = "cuda"

    def is_sleep_mode_available(self) -> bool:
        return True


# Registered as sys.modules["vllm.platforms"] by the tests that install the fake.
platforms = types.SimpleNamespace(current_platform=_Platform())


@dataclasses.dataclass
class SamplingParams:
    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True

    def __post_init__(self) -> None:
        assert self.n >= 1 and self.temperature >= 0 and 0 < self.top_p <= 1
        assert self.top_k >= -1 and 0 <= self.min_p <= 1
        assert self.max_tokens is None or self.max_tokens >= 1


@dataclasses.dataclass
class Logprob:
    logprob: float


@dataclasses.dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: Sequence[int]
    finish_reason: str | None
    logprobs: list[dict[int, Logprob]] | None = None
    """With `SamplingParams.logprobs=0`: per token, the sampled token's log-prob."""


@dataclasses.dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    finished: bool = True


class FakeModel:
    """The model inside the worker: HF-named parameters, filled by `load_weights`."""

    def __init__(self, shapes: dict[str, torch.Size]) -> None:
        self.shapes = shapes
        self.weights: dict[str, torch.Tensor] = {}
        self.load_calls: list[list[str]] = []

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        loaded = []
        for name, tensor in weights:
            if name not in self.shapes:
                raise KeyError(f"vLLM model has no parameter {name!r}")
            assert tensor.shape == self.shapes[name], (name, tensor.shape)
            self.weights[name] = tensor.detach().clone()
            loaded.append(name)
        self.load_calls.append(loaded)
        return set(loaded)


class _ModelRunner:
    def __init__(self, model: FakeModel) -> None:
        self.model = model


class _Worker:
    def __init__(self, model: FakeModel) -> None:
        self.model_runner = _ModelRunner(model)

    def reload_weights(
        self,
        weights_iterator: Iterable[tuple[str, torch.Tensor]] | None = None,
        weights_path: str | None = None,
        is_checkpoint_format: bool = True,
    ) -> None:
        assert weights_iterator is not None and is_checkpoint_format
        self.model_runner.model.load_weights(weights_iterator)


# The fake learns the model's parameter names and shapes from whoever builds it (the test).
MODEL_SHAPES: dict[str, torch.Size] = {}
INSTANCES: list[LLM] = []


class LLM:
    def __init__(self, model: str, **kwargs: Any) -> None:
        unknown = set(kwargs) - ENGINE_ARGS
        if unknown:
            raise TypeError(f"EngineArgs.__init__() got unexpected keyword arguments {unknown}")
        self.kwargs = {"model": model, **kwargs}
        self.model = FakeModel(dict(MODEL_SHAPES))
        self.worker = _Worker(self.model)
        self.weights_valid = kwargs.get("load_format") not in ("dummy",)
        self.asleep: set[str] = set()
        self.calls: list[tuple[str, Any]] = []
        INSTANCES.append(self)

    def sleep(self, level: int = 1, mode: str = "abort") -> None:
        assert self.kwargs.get("enable_sleep_mode"), "Sleep mode is not enabled"
        assert level in (1, 2) and mode in ("abort", "wait", "keep")
        self.calls.append(("sleep", level))
        self.asleep = {"weights", "kv_cache", "scheduling"}
        if level == 2:
            self.weights_valid = False

    def wake_up(self, tags: list[str] | None = None) -> None:
        assert tags is None or set(tags) <= WAKE_TAGS, tags
        self.calls.append(("wake_up", None if tags is None else list(tags)))
        self.asleep -= set(tags) if tags is not None else set(WAKE_TAGS)

    def collective_rpc(
        self,
        method: str | Callable[..., Any],
        timeout: float | None = None,
        args: tuple = (),
        kwargs: dict[str, Any] | None = None,
    ) -> list[Any]:
        assert "weights" not in self.asleep, "weights are asleep: wake_up(['weights']) first"
        self.calls.append(("collective_rpc", method if isinstance(method, str) else "callable"))
        bound = getattr(self.worker, method) if isinstance(method, str) else None
        result = bound(*args, **(kwargs or {})) if bound else method(self.worker, *args)
        self.weights_valid = set(self.model.weights) == set(self.model.shapes)
        return [result]

    def reset_prefix_cache(
        self, reset_running_requests: bool = False, reset_connector: bool = False
    ) -> bool:
        self.calls.append(("reset_prefix_cache", None))
        return True

    def generate(
        self,
        prompts: Sequence[dict[str, list[int]]],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        *,
        use_tqdm: bool = True,
        lora_request: Any = None,
        priority: list[int] | None = None,
    ) -> list[RequestOutput]:
        assert not self.asleep, f"generate while asleep: {sorted(self.asleep)}"
        assert self.weights_valid, "generating with dummy (never synced) or discarded weights"
        params = (
            list(sampling_params)
            if isinstance(sampling_params, Sequence)
            else [sampling_params or SamplingParams()] * len(prompts)
        )
        assert len(params) == len(prompts), "one SamplingParams per prompt"
        self.calls.append(("generate", len(prompts)))
        return [
            self._one(str(i), prompt["prompt_token_ids"], p)
            for i, (prompt, p) in enumerate(zip(prompts, params, strict=True))
        ]

    def _one(self, request_id: str, ids: list[int], params: SamplingParams) -> RequestOutput:
        assert all(isinstance(t, int) for t in ids), "prompt_token_ids must be a list of ints"
        vocab = self.kwargs.get("hf_overrides", {}).get("vocab_size") or 64
        digest = hashlib.sha256(repr((params.seed, ids, self._weights_sum())).encode()).digest()
        tokens: list[int] = []
        finish = "length"
        for step in range(params.max_tokens or 16):
            token = digest[step % len(digest)] % vocab if params.temperature else ids[-1] % vocab
            tokens.append(token)
            if not params.ignore_eos and token in (params.stop_token_ids or []):
                finish = "stop"
                break
        scored = None
        if params.logprobs is not None:  # a fixed fake log-prob per position
            scored = [{t: Logprob(-0.25 * (1 + step))} for step, t in enumerate(tokens)]
        output = CompletionOutput(0, "", tokens, finish, scored)
        return RequestOutput(request_id, None, ids, [output])

    def _weights_sum(self) -> float:
        return round(sum(float(t.float().sum()) for t in self.model.weights.values()), 3)
