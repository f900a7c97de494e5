"""A GRPO run with multi-turn rollouts and a calculator tool, end to end on CPU (`kuberl train`).

The tiny policy is first taught one transcript (call the calculator, read its answer, answer),
so that its rollouts call the tool: the run's metrics show the calls, the turns, and responses
longer than the policy's own tokens (the tool's tokens are in the trajectory, not in the loss).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from .conftest import (
    TOKENIZER_DIR,
    assert_same_training,
    base_config,
    read_metrics,
    run_train,
    set_key,
)

pytestmark = pytest.mark.runtime

QUESTION = "What is 14 - 1?"
CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "14 - 1"}}</tool_call>'
TOOL_CONFIG = """tools:
  - class_name: kuberl.tools.calculator
    config: {type: native}
    tool_schema:
      type: function
      function:
        name: calculator
        description: Evaluate an arithmetic expression.
        parameters:
          type: object
          properties: {expression: {type: string, description: e.g. 1234 * 5678}}
          required: [expression]
"""


def _transcript(tokenizer) -> tuple[list[int], list[int]]:
    """The conversation's ids and a loss mask over the assistant's tokens."""
    ids: list[int] = []
    mask: list[int] = []
    parts = [
        (f"<|im_start|>user\n{QUESTION}<|im_end|>\n<|im_start|>assistant\n", 0),
        (CALL + "<|im_end|>", 1),
        ("\n<|im_start|>tool\n13<|im_end|>\n<|im_start|>assistant\n", 0),
        ("#### 13<|im_end|>", 1),
    ]
    for text, trained in parts:
        part = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += part
        mask += [trained] * len(part)
    return ids, mask


def teach(model_dir: Path, out: Path) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    ids, mask = _transcript(tokenizer)
    inputs = torch.tensor([ids])
    labels = torch.where(torch.tensor([mask]).bool(), inputs, torch.tensor(-100))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: more threads only contend
    try:
        for _ in range(150):
            loss = model(input_ids=inputs, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    assert loss.item() < 0.05, loss.item()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def data_rows(path: Path, rows: int) -> Path:
    record = {
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": QUESTION}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "13"},
        "agent_name": "tool_agent",
        "extra_info": {"index": 0, "tools_kwargs": {"calculator": {"create_kwargs": {}}}},
    }
    lines = [
        json.dumps({**record, "extra_info": {**record["extra_info"], "index": i}})
        for i in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def multi_turn_config(model: Path, out: Path, tmp_path: Path, **trainer) -> dict:
    """GRPO on 8 rows of the taught question, calculator tool, at most 3 assistant turns."""
    tools = tmp_path / "tool_config.yaml"
    tools.write_text(TOOL_CONFIG)
    config = base_config(model, out, **{"total_training_steps": 2, **trainer})
    del config["custom_reward_function"]  # verl's GSM8K scorer for openai/gsm8k rows
    set_key(config, "data.train_files", str(data_rows(tmp_path / "train.jsonl", 8)))
    set_key(config, "data.max_response_length", 160)
    set_key(config, "actor_rollout_ref.rollout.temperature", 0.3)
    mt = "actor_rollout_ref.rollout.multi_turn."
    set_key(config, mt + "enable", True)
    set_key(config, mt + "max_assistant_turns", 3)
    set_key(config, mt + "tool_config_path", str(tools))
    set_key(config, "actor_rollout_ref.rollout.agent.default_agent_loop", "tool_agent")
    return config


@pytest.fixture(scope="module")
def taught(tiny_model_dir, tmp_path_factory) -> Path:
    return teach(tiny_model_dir, tmp_path_factory.mktemp("taught") / "model")


def test_grpo_with_a_calculator_tool_trains_end_to_end(taught, tmp_path):
    """With rollout correction on: the multi-turn batch carries the engine's log-probs."""
    out = tmp_path / "out"
    config = multi_turn_config(taught, out, tmp_path)
    set_key(config, "algorithm.rollout_correction.rollout_is", "token")
    done = run_train(config, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = read_metrics(out)
    assert sorted(metrics) == [1, 2]
    first = metrics[1]
    assert first["tool/calculator/calls"] >= 4  # most of the 8 rollouts called it
    assert first["tool/calculator/failures"] == 0
    assert first["timing_s/tool/calculator/max"] >= first["timing_s/tool/calculator/mean"] > 0
    assert first["num_turns/mean"] > 2
    assert first["critic/score/mean"] > 0  # "#### 13" after reading the tool
    # the trainer's old log-probs against the engine's, on the policy's tokens of every turn
    assert first["training/rollout_probs_diff_max"] < 1e-3
    assert abs(first["rollout_corr/kl"]) < 1e-4
    # the taught policy is sure of every token at temperature 0.3: probabilities of 1 have no
    # variance, so their Pearson correlation is NaN (as verl's); every other metric is finite
    finite = {k: v for k, v in first.items() if k != "training/rollout_actor_probs_pearson_corr"}
    assert all(torch.isfinite(torch.tensor(v)) for v in finite.values())


def test_two_ranks_roll_out_and_train_as_one(taught, tmp_path):
    """Each rank runs its share of the rows turn by turn; the gathered batch, metrics and
    trained weights equal one rank's (every row samples with its own seeds)."""
    outs = {world: tmp_path / f"world{world}" for world in (1, 2)}
    for world, out in outs.items():
        config = multi_turn_config(taught, out, tmp_path, n_gpus_per_node=world)
        # verl's balance_batch regroups rows per DP rank, so mini-batches depend on the world size.
        set_key(config, "trainer.balance_batch", False)
        set_key(config, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 1)
        done = run_train(config, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
    assert read_metrics(outs[2])[1]["tool/calculator/calls"] >= 4
    assert_same_training(outs[1], outs[2], [1, 2])


def test_the_engines_log_probs_of_every_turn_are_the_trainers(taught):
    """With ``log_probs`` the multi-turn rollout keeps the HF engine's log-prob of each token the
    policy sampled, turn after turn, and 0 on the tool's context: on the policy's tokens they
    equal the trainer's forward over the whole trajectory (``forward_responses``, as the actor's
    old log-probs), so rollout correction reads a multi-turn batch like a single-turn one."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kuberl_runtime.data import PromptSample
    from kuberl_runtime.data.tokenize import encode_text
    from kuberl_runtime.distributed import RankInfo
    from kuberl_runtime.engine.logprob import forward_responses
    from kuberl_runtime.rollout.base import SamplingParams
    from kuberl_runtime.rollout.hf import HFRollout
    from kuberl_runtime.rollout.multi_turn import MultiTurnSettings, TurnContext
    from kuberl_runtime.rollout.multi_turn_batch import generate_multi_turn
    from kuberl_runtime.tools import CalculatorTool
    from kuberl_runtime.trainer.batch import Batch

    tokenizer = AutoTokenizer.from_pretrained(taught)
    model = AutoModelForCausalLM.from_pretrained(taught)
    messages = [{"role": "user", "content": QUESTION}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    samples = [
        PromptSample(i, encode_text(tokenizer, prompt), "openai/gsm8k", "13", raw_prompt=messages)
        for i in range(6)
    ]
    temperature, prompt_length = 0.7, 24
    ctx = TurnContext(
        engine=HFRollout(model, eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id),
        tokenizer=tokenizer,
        params=SamplingParams(response_length=120, temperature=temperature),
        eos_ids=[tokenizer.eos_token_id],
        pad_id=tokenizer.pad_token_id,
        tools={"calculator": CalculatorTool()},
        settings=MultiTurnSettings(max_assistant_turns=3, default_agent_loop="tool_agent"),
        log_probs=True,
    )
    prompts = Batch({}, {"sample": samples, "uid": [str(i) for i in range(6)]})
    batch, metrics = generate_multi_turn(
        prompts,
        ctx,
        ranks=RankInfo(rank=0, world_size=1, local_rank=0),
        row_seeds=list(range(6)),
        prompt_length=prompt_length,
    )
    policy = batch["response_mask"].bool()
    tool_context = batch["attention_mask"][:, prompt_length:].bool() & ~policy
    assert metrics["tool/calculator/calls"] >= 3 and tool_context.any(1).sum() >= 3
    # policy tokens after the tool's context: later turns are compared too
    assert (policy & (tool_context.long().cumsum(1) > 0)).any()
    engine = batch["rollout_log_probs"]
    with torch.no_grad():
        trainer = forward_responses(model, batch.tensors, temperature=temperature).log_probs
    torch.testing.assert_close(engine[policy], trainer[policy].float(), atol=1e-4, rtol=0)
    assert (engine[~policy] == 0).all() and (engine[policy] < 0).all()
