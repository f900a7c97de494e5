"""Padded forwards drop the prompt columns no row attends to: same log-probs, entropy, values
and gradients as the untrimmed batch (prompts left-padded to max_prompt_length)."""

from __future__ import annotations

import torch

from kuberl_runtime.engine.logprob import forward_responses
from kuberl_runtime.engine.model_builder import ModelSpec, build_causal_lm
from kuberl_runtime.trainer.batch import Batch
from tests.runtime.engine.conftest import fixed_batch

KEYS = ("input_ids", "attention_mask", "position_ids", "responses", "response_mask")


def left_padded(batch: Batch, extra: int, pad_id: int) -> dict[str, torch.Tensor]:
    """The same rows with `extra` more all-padding columns on the left."""
    rows = batch["input_ids"].shape[0]
    out = {k: batch[k] for k in KEYS}
    out["input_ids"] = torch.cat([torch.full((rows, extra), pad_id), batch["input_ids"]], 1)
    out["attention_mask"] = torch.cat(
        [torch.zeros(rows, extra, dtype=torch.long), batch["attention_mask"]], 1
    )
    out["position_ids"] = torch.cat(
        [torch.zeros(rows, extra, dtype=torch.long), batch["position_ids"]], 1
    )
    return out


def test_all_padding_columns_change_nothing(tokenizer, tiny_model_path):
    torch.manual_seed(0)
    model = build_causal_lm(ModelSpec(path=str(tiny_model_path)))
    batch = fixed_batch(tokenizer)
    widths = []
    model.register_forward_pre_hook(
        lambda _, args, kwargs: widths.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    results = []
    for extra in (0, 7):
        model.zero_grad()
        tensors = left_padded(batch, extra, tokenizer.pad_token_id)
        out = forward_responses(model, tensors, calculate_entropy=True)
        assert out.log_probs is not None and out.entropy is not None
        (out.log_probs * tensors["response_mask"]).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        results.append((out.log_probs.detach(), out.entropy.detach(), grads))
    assert widths[0] == widths[1] < batch["input_ids"].shape[1]  # padding columns never ran
    (lp, ent, grads), (lp_padded, ent_padded, grads_padded) = results
    torch.testing.assert_close(lp_padded, lp, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent_padded, ent, rtol=1e-5, atol=1e-5)
    for name, grad in grads.items():
        torch.testing.assert_close(grads_padded[name], grad, rtol=1e-4, atol=1e-6)
