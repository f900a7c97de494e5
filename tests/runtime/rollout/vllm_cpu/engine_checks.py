"""Runs in `.venv-vllm-cpu` (the real vLLM 0.32 engine on CPU), launched by test_real_engine.py.

    python engine_checks.py WORKDIR [TP]  # WORKDIR/model_a, WORKDIR/model_b, WORKDIR/prompts.json

A training process as the launcher's worker sets it up (kuberl's `init_distributed` on gloo, one
thread, the trainer's seed) builds kuberl's VLLMRollout from a RolloutPlan with
`tensor_model_parallel_size` TP (default 1; the test starts TP ranks with RANK/WORLD_SIZE set),
samples, syncs model B's weights through `update_weights` and generates greedily with log-probs.
With TP 1 a second engine in bf16 (the rollout dtype on accelerators) is built beside it and
synced the same way. It prints one JSON line with what it saw; the test compares it with Hugging
Face forwards of its own.
"""

from __future__ import annotations

import json
import logging
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM, AutoTokenizer

from kuberl_api.plan.standalone import rollout_plan
from kuberl_runtime.device import resolve_device
from kuberl_runtime.distributed import init_distributed, shutdown_distributed
from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.rollout.vllm import build_vllm_rollout

RESPONSE = 6
N = 3  # samples per prompt, as the trainer repeats prompts with one seed per row


def rng_draws() -> list[float]:
    return [random.random(), float(np.random.rand()), float(torch.rand(()))]


def left_padded(prompts: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    return ids, mask


def sample_rows(rollout: Any, prompts: list[list[int]], pad: int) -> dict[str, Any]:
    rows = [p for p in prompts for _ in range(N)]
    seeds = [1000 + i for i in range(len(rows))]
    ids, mask = left_padded(rows, pad)
    params = SamplingParams(response_length=RESPONSE, temperature=1.0, top_k=0, ignore_eos=True)
    first = rollout.generate(ids, mask, params, seeds=seeds)
    again = rollout.generate(ids, mask, params, seeds=seeds)
    reordered = rollout.generate(ids.flip(0), mask.flip(0), params, seeds=seeds[::-1])
    return {
        "seeds": seeds,
        "first": first.tolist(),
        "again": again.tolist(),
        "reordered": reordered.flip(0).tolist(),
    }


def greedy_with_logprobs(rollout: Any, prompts: list[list[int]]) -> dict[str, Any]:
    import vllm

    params = vllm.SamplingParams(
        temperature=0.0, max_tokens=RESPONSE, ignore_eos=True, logprobs=0, detokenize=False
    )
    outputs = rollout.llm.generate(
        [{"prompt_token_ids": p} for p in prompts], sampling_params=params, use_tqdm=False
    )
    tokens, logprobs = [], []
    for out in outputs:
        seq = out.outputs[0]
        tokens.append(list(seq.token_ids))
        steps = zip(seq.token_ids, seq.logprobs, strict=True)
        logprobs.append([step[token].logprob for token, step in steps])
    return {"tokens": tokens, "logprobs": logprobs}


def all_reduce_works() -> bool:
    value = torch.ones(1)
    dist.all_reduce(value)
    return bool(value.item() == dist.get_world_size())


def build_rollout(workdir: Path, tokenizer: Any, dtype: str, tp: int, host: Any) -> Any:
    plan = rollout_plan(
        {
            "name": "vllm",
            "dtype": dtype,
            "load_format": "auto",
            "max_num_seqs": 16,
            "tensor_model_parallel_size": tp,
            "log_prob_max_token_len_per_gpu": 16384,
        },
        max_prompt_length=16,
        max_response_length=RESPONSE,
    )
    return build_vllm_rollout(
        plan,
        model_path=str(workdir / "model_a"),
        trust_remote_code=False,
        hf_overrides={},
        eos_ids=[tokenizer.eos_token_id],
        pad_id=tokenizer.pad_token_id,
        device=torch.device("cpu"),
        lora_scaling=None,
        host_model=host,
    )


def bf16_sync(workdir: Path, tokenizer: Any, prompts: list[list[int]], model_b: Any) -> Any:
    """A bf16 engine on model A, synced with model B's fp32 parameters (cast by the rollout)."""
    rollout = build_rollout(workdir, tokenizer, "bfloat16", 1, None)
    engine_dtype = rollout.llm.llm_engine.vllm_config.model_config.dtype
    rollout.update_weights(model_b.named_parameters())
    result = {"engine_dtype": str(engine_dtype), "greedy_b": greedy_with_logprobs(rollout, prompts)}
    return rollout, result


def main(workdir: Path, tp: int) -> dict[str, Any]:
    prompts = json.loads((workdir / "prompts.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(workdir / "model_a")
    device = resolve_device("cpu")
    init_distributed(device)  # as the launcher's worker: gloo, before any model
    torch.set_num_threads(1)
    random.seed(7), np.random.seed(7), torch.manual_seed(7)
    expected_draws = rng_draws()
    random.seed(7), np.random.seed(7), torch.manual_seed(7)

    host = AutoModelForCausalLM.from_pretrained(workdir / "model_a", dtype=torch.float32)
    rollout = build_rollout(workdir, tokenizer, "float32", tp, host)
    cache_config = rollout.llm.llm_engine.vllm_config.cache_config
    result: dict[str, Any] = {
        "rank": dist.get_rank(),
        "tp_size": rollout.llm.llm_engine.vllm_config.parallel_config.tensor_parallel_size,
        "rng_kept": rng_draws() == expected_draws,
        "threads_after_build": torch.get_num_threads(),
        "engine_kwargs_kv_bytes": cache_config.kv_cache_memory_bytes,
        "sleep_mode": rollout.free_cache_engine,
        "greedy_a": greedy_with_logprobs(rollout, prompts),
        "sampled": sample_rows(rollout, prompts, tokenizer.pad_token_id),
        "group_alive_after_generate": all_reduce_works(),
    }
    model_b = AutoModelForCausalLM.from_pretrained(workdir / "model_b", dtype=torch.float32)
    names = [name for name, _ in model_b.named_parameters()]
    result["lm_head_in_named_parameters"] = "lm_head.weight" in names
    rollout.update_weights(model_b.named_parameters())  # tied head listed once
    result["greedy_b"] = greedy_with_logprobs(rollout, prompts)
    ids, mask = left_padded(prompts, tokenizer.pad_token_id)
    greedy = SamplingParams(response_length=RESPONSE, do_sample=False, ignore_eos=True)
    result["rollout_greedy_b"] = rollout.generate(ids, mask, greedy, seeds=[0] * len(prompts))
    result["rollout_greedy_b"] = result["rollout_greedy_b"].tolist()
    sampled = SamplingParams(response_length=RESPONSE, temperature=0.7, top_k=20, ignore_eos=True)
    tokens, log_probs = rollout.generate_with_log_probs(ids, mask, sampled, seeds=[3, 4, 5])
    result["scored_b"] = {"tokens": tokens.tolist(), "logprobs": log_probs.tolist()}
    b_state = model_b.state_dict()
    result["host_copy_follows"] = all(
        torch.equal(t, b_state[n]) for n, t in rollout.model.state_dict().items()
    )
    result["group_alive_after_sync"] = all_reduce_works()
    if tp == 1:
        bf16, result["bf16"] = bf16_sync(workdir, tokenizer, prompts, model_b)
        bf16.close()  # vLLM's teardown destroys the default group: the last engine's is skipped
    rollout.close()  # before the trainer's own teardown, as the worker orders it
    shutdown_distributed()
    return result


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    tp = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    print(json.dumps(main(Path(sys.argv[1]), tp)), flush=True)
