"""vLLM's `RequestOutput`s as the rollout's tensors: response ids and sampled-token log-probs.

`outputs[i].outputs[0]` is row i's one sample (n=1): `.token_ids`, and with `logprobs=0` in its
`SamplingParams`, `.logprobs`: per generated token a mapping token id -> `Logprob` holding at
least the sampled token's (`.logprob`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def response_ids(outputs: Sequence[Any], response_length: int, pad_id: int) -> torch.Tensor:
    """(rows, response_length) token ids, `pad_id` after each row's last token."""
    responses = torch.full((len(outputs), response_length), pad_id, dtype=torch.long)
    for i, output in enumerate(outputs):
        ids = list(output.outputs[0].token_ids)[:response_length]
        responses[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return responses


def sampled_log_probs(outputs: Sequence[Any], response_length: int) -> torch.Tensor:
    """(rows, response_length) fp32 log-prob of each sampled token, 0 after each row's end."""
    log_probs = torch.zeros((len(outputs), response_length))
    for i, output in enumerate(outputs):
        sample = output.outputs[0]
        steps = zip(sample.token_ids, sample.logprobs, strict=True)
        values = [step[token].logprob for token, step in steps][:response_length]
        log_probs[i, : len(values)] = torch.tensor(values, dtype=torch.float32)
    return log_probs
