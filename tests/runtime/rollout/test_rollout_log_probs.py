"""The HF rollout's own log-probs of the tokens it sampled (rollout correction's π_rollout): the
same tokens as `generate`, and each token's log-prob equal to a full forward over prompt +
response of log-softmax(filtered logits / temperature), 0 after the row's end."""

from __future__ import annotations

import pytest
import torch

from kuberl_runtime.rollout.base import SamplingParams, response_mask_from
from kuberl_runtime.rollout.hf import HFRollout
from kuberl_runtime.rollout.sampling import filter_logits
from tests.runtime.rollout.test_hf_decode import EOS, PAD, _model, _prompts

LOG_PROB_TOL = 1e-5


def _full_forward_log_probs(model, prompts, mask, responses, params) -> torch.Tensor:
    """log p(y_t | prompt, y_<t) from one forward over each whole row (no KV cache)."""
    ids = torch.cat([prompts, responses], dim=1)
    attention = torch.cat([mask, torch.ones_like(responses)], dim=1)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attention, position_ids=positions).logits
    logits = logits[:, prompts.shape[1] - 1 : -1].double()
    if not params.greedy:
        logits = filter_logits(logits / params.temperature, params.top_k, params.top_p)
    return logits.log_softmax(-1).gather(-1, responses.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(response_length=12, temperature=0.7),
        SamplingParams(response_length=12, temperature=1.3, top_k=20, top_p=0.9),
        SamplingParams(response_length=12, do_sample=False),
    ],
    ids=["temperature", "top-k-top-p", "greedy"],
)
def test_hf_log_probs_are_the_sampling_distributions(params):
    model = _model()
    prompts, mask = _prompts([3, 7, 5], n=2)
    seeds = list(range(10, 16))
    rollout = HFRollout(model, eos_ids=EOS, pad_id=PAD)
    responses, log_probs = rollout.generate_with_log_probs(prompts, mask, params, seeds)
    assert torch.equal(responses, rollout.generate(prompts, mask, params, seeds))
    assert log_probs.dtype == torch.float32
    valid = response_mask_from(responses, EOS, ignore_eos=False).bool()
    assert not valid.all(), "some row should finish early: the test covers the padding"
    expected = _full_forward_log_probs(model, prompts, mask, responses, params)
    torch.testing.assert_close(
        log_probs[valid].double(), expected[valid], atol=LOG_PROB_TOL, rtol=0
    )
    assert (log_probs[~valid] == 0).all()
    assert (log_probs[valid] <= 0).all()
