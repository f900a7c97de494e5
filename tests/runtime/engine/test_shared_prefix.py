"""Padded forwards run each distinct prompt once (engine/shared_prefix.py): the same log-probs,
entropy and gradients as the plain forward, plain and FSDP2-sharded; the plain forward where no
prompt repeats or a layer checkpoints its activations while training."""

from __future__ import annotations

import pytest
import torch

from kuberl_api.plan.standalone import actor_plan
from kuberl_runtime.device import Device
from kuberl_runtime.engine import logprob, shared_prefix
from kuberl_runtime.engine.fsdp import apply_fsdp
from kuberl_runtime.engine.logprob import forward_responses
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm
from kuberl_runtime.engine.shared_prefix import _length_groups, prompt_groups
from kuberl_runtime.rollout.base import build_response_batch

N = 3  # samples per prompt


def grouped_batch(tokenizer, prompts: int = 3, prompt_length: int = 9, response_length: int = 8):
    """`prompts` left-padded prompts of different lengths, each N times in a row with its own
    response (some ending early at EOS), and one more prompt that appears once."""
    gen = torch.Generator().manual_seed(0)
    rows = prompts * N + 1
    ids = torch.full((rows, prompt_length), tokenizer.pad_token_id)
    mask = torch.zeros(rows, prompt_length, dtype=torch.long)
    for prompt in range(prompts + 1):
        length = 3 + 2 * prompt
        tokens = torch.randint(3, len(tokenizer), (length,), generator=gen)
        group = slice(prompt * N, min(prompt * N + N, rows))
        ids[group, -length:] = tokens
        mask[group, -length:] = 1
    responses = torch.randint(3, len(tokenizer), (rows, response_length), generator=gen)
    for row in range(0, rows, 2):
        responses[row, 1 + row % (response_length - 1)] = tokenizer.eos_token_id
    return build_response_batch(
        ids, mask, responses, eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id
    ).tensors


def _run(model, batch, monkeypatch, share: bool):
    with monkeypatch.context() as patch:
        if not share:
            patch.setattr(logprob, "prompt_groups", lambda *_: None)
        model.zero_grad(set_to_none=True)
        out = forward_responses(model, batch, temperature=0.7, calculate_entropy=True)
        weights = torch.linspace(-1, 1, out.log_probs.numel()).view_as(out.log_probs)
        ((out.log_probs + 0.1 * out.entropy) * weights * batch["response_mask"]).sum().backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    return out.log_probs.detach(), out.entropy.detach(), grads


def _assert_same(shared, plain, mask):
    (lp, ent, grads), (plain_lp, plain_ent, plain_grads) = shared, plain
    torch.testing.assert_close(lp[mask], plain_lp[mask], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent[mask], plain_ent[mask], rtol=1e-5, atol=1e-5)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_rows_group_by_prompt(tokenizer):
    batch = grouped_batch(tokenizer)
    length = batch["responses"].shape[1]
    first, inverse = prompt_groups(batch, length)
    assert sorted(first.tolist()) == [0, 3, 6, 9]
    assert [int(first[i]) for i in inverse] == [0, 0, 0, 3, 3, 3, 6, 6, 6, 9]
    distinct = {k: v[[0, 3, 6, 9]] for k, v in batch.items()}
    assert prompt_groups(distinct, length) is None  # nothing to share: the plain forward


@pytest.mark.parametrize("split", [False, True])
def test_each_prompt_runs_once_with_the_plain_forwards_outputs_and_gradients(
    tokenizer, tiny_model_path, monkeypatch, split
):
    model = build_causal_lm(ModelSpec(path=str(tiny_model_path)))
    batch = grouped_batch(tokenizer)
    if split:  # rows that ended early run their response columns as a group of their own
        monkeypatch.setattr(shared_prefix, "MIN_SAVED_POSITIONS", 1)
    rows_seen = []
    model.register_forward_pre_hook(
        lambda _, args, kwargs: rows_seen.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True,
    )
    shared = _run(model, batch, monkeypatch, share=True)
    prompt_width = batch["input_ids"].shape[1] - batch["responses"].shape[1]
    response_length = batch["responses"].shape[1]
    # 4 distinct prompts once each, then the rows' response columns but the last
    assert rows_seen[0] == (4, prompt_width)
    if split:
        (short_rows, short_width), (long_rows, long_width) = rows_seen[1:]
        assert short_rows + long_rows == 10 and short_width < long_width == response_length - 1
    else:
        assert rows_seen[1:] == [(10, response_length - 1)]
    plain = _run(model, batch, monkeypatch, share=False)
    _assert_same(shared, plain, batch["response_mask"].bool())


def test_groups_by_length_run_fewer_columns_only_when_worth_a_call():
    needed = torch.tensor([127, 60, 127, 55, 127, 127, 70, 127] * 2)  # 16 x 127 - 342 columns
    (short, short_width), (long, long_width) = _length_groups(needed)
    assert sorted(short.tolist()) == [1, 3, 6, 9, 11, 14] and short_width == 70
    assert sorted(long.tolist()) == [0, 2, 4, 5, 7, 8, 10, 12, 13, 15] and long_width == 127
    ((everyone, width),) = _length_groups(torch.tensor([127, 120, 127, 126]))  # saves < 256
    assert sorted(everyone.tolist()) == [0, 1, 2, 3] and width == 127
    assert _length_groups(torch.tensor([0, 0])) == []  # one-token responses: no columns


def test_fsdp2_sharded_model_gets_the_same_gradients(
    tokenizer, tiny_model_path, monkeypatch, process_group
):
    plan = actor_plan({"ppo_mini_batch_size": 2}, rollout_n=N, dp_size=1)
    model = apply_fsdp(
        build_causal_lm(ModelSpec(path=str(tiny_model_path))), plan.fsdp_config, Device("cpu")
    )
    batch = grouped_batch(tokenizer)
    shared = _run(model, batch, monkeypatch, share=True)
    plain = _run(model, batch, monkeypatch, share=False)
    _assert_same(shared, plain, batch["response_mask"].bool())


@pytest.mark.parametrize("training", [True, False])
def test_checkpointed_layers_run_the_plain_forward_while_training(
    tokenizer, tiny_model_path, monkeypatch, training
):
    spec = ModelSpec(path=str(tiny_model_path), enable_gradient_checkpointing=True)
    model = build_causal_lm(spec).train(training)
    batch = grouped_batch(tokenizer)
    calls = []
    model.register_forward_pre_hook(lambda *_: calls.append(1))
    shared = _run(model, batch, monkeypatch, share=True)
    assert len(calls) == (1 if training else 2)  # eval (reference, old log-probs) still shares
    plain = _run(model, batch, monkeypatch, share=False)
    _assert_same(shared, plain, batch["response_mask"].bool())
