"""The HF rollout's decode loop: preallocated KV cache, finished rows leaving the batch, one
prefill per distinct prompt — the same tokens as the plain loop (full batch, `DynamicCache`,
transformers' SDPA) for the same seeds, greedy and sampled."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache, Qwen2Config, Qwen2ForCausalLM

from kuberl_runtime.rollout.base import SamplingParams
from kuberl_runtime.rollout.decode_cache import PreallocatedLayer, decode_sdpa
from kuberl_runtime.rollout.hf import HFRollout
from kuberl_runtime.rollout.sampling import row_generators, sample_next

VOCAB, PAD = 64, 0
EOS = list(range(1, 9))  # eight end tokens: rows finish at many different steps


def _model() -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped heads: the CPU decode path reads them in place
        max_position_embeddings=128,
        pad_token_id=PAD,
        attn_implementation="sdpa",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return Qwen2ForCausalLM(config).eval()


def _prompts(lengths: list[int], n: int, width: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded prompts, each repeated `n` times next to itself (as the trainer sends them)."""
    g = torch.Generator().manual_seed(1)
    prompts = torch.full((len(lengths) * n, width), PAD, dtype=torch.long)
    mask = torch.zeros_like(prompts)
    for i, length in enumerate(lengths):
        ids = torch.randint(9, VOCAB, (length,), generator=g)
        prompts[i * n : (i + 1) * n, width - length :] = ids
        mask[i * n : (i + 1) * n, width - length :] = 1
    return prompts, mask


@torch.no_grad()
def _plain_loop(model, prompts, mask, params, seeds) -> torch.Tensor:
    """The reference: every row in every step, a concatenating cache, finished rows padded."""
    rows = prompts.shape[0]
    mask = mask.long()
    position = (mask.cumsum(-1) - 1).clamp(min=0)
    generators = row_generators(seeds)
    responses = torch.full((rows, params.response_length), PAD, dtype=torch.long)
    finished = torch.zeros(rows, dtype=torch.bool)
    cache = DynamicCache()
    out = model(
        input_ids=prompts, attention_mask=mask, position_ids=position, past_key_values=cache
    )
    position = position[:, -1:]
    for step in range(params.response_length):
        tokens = sample_next(out.logits[:, -1], params, generators)
        responses[:, step] = torch.where(finished, PAD, tokens)
        finished |= torch.isin(tokens, torch.tensor(EOS)) & ~torch.tensor(params.ignore_eos)
        if finished.all():
            break
        mask = torch.cat([mask, torch.ones(rows, 1, dtype=torch.long)], dim=1)
        position = position + 1
        out = model(
            input_ids=tokens.unsqueeze(1),
            attention_mask=mask,
            position_ids=position,
            past_key_values=cache,
        )
    return responses


class _BatchSizes(torch.nn.Module):
    """The model, recording the rows of every forward call."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model, self.config, self.rows = model, model.config, []

    def forward(self, **kwargs):
        self.rows.append(kwargs["input_ids"].shape[0])
        return self.model(**kwargs)


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(response_length=24, do_sample=False),
        SamplingParams(response_length=24, temperature=1.0),
        SamplingParams(response_length=24, temperature=0.8, top_k=20, top_p=0.9),
        SamplingParams(response_length=12, temperature=1.0, ignore_eos=True),
    ],
    ids=["greedy", "sampled", "top-k-top-p", "ignore-eos"],
)
def test_same_tokens_as_the_plain_loop(params):
    model = _model()
    prompts, mask = _prompts([3, 7, 5, 10], n=3)
    seeds = list(range(100, 100 + prompts.shape[0]))
    expected = _plain_loop(model, prompts, mask, params, seeds)
    got = HFRollout(model, eos_ids=EOS, pad_id=PAD).generate(prompts, mask, params, seeds)
    assert torch.equal(got, expected)
    lengths = (expected != PAD).sum(1)
    if not params.ignore_eos:
        assert len(set(lengths.tolist())) > 2  # rows really ended at different steps


def test_finished_rows_leave_the_batch_and_each_prompt_prefills_once():
    model = _BatchSizes(_model())
    prompts, mask = _prompts([4, 6, 9], n=4)
    params = SamplingParams(response_length=24)
    seeds = list(range(12))
    responses = HFRollout(model, eos_ids=EOS, pad_id=PAD).generate(prompts, mask, params, seeds)
    assert model.rows[0] == 3  # one prefill row per distinct prompt
    decode = model.rows[1:]
    assert decode == sorted(decode, reverse=True) and decode[0] <= 12 and decode[-1] < decode[0]
    is_eos = torch.isin(responses, torch.tensor(EOS))
    ended = torch.where(is_eos.any(1), is_eos.long().argmax(1) + 1, responses.shape[1])
    # a decode step for step s serves exactly the rows still unfinished after token s-1
    for step, live in enumerate(decode, start=1):
        assert live == int((ended > step).sum())


def test_a_row_generates_the_same_whatever_else_is_in_its_batch():
    model = _model()
    prompts, mask = _prompts([3, 8, 6], n=2)
    params = SamplingParams(response_length=20)
    rollout = HFRollout(model, eos_ids=EOS, pad_id=PAD)
    together = rollout.generate(prompts, mask, params, [5, 6, 7, 8, 9, 10])
    alone = rollout.generate(prompts[3:4], mask[3:4], params, [8])
    assert torch.equal(together[3:4], alone)


def test_preallocated_layer_matches_the_concatenating_one():
    ours = PreallocatedLayer(capacity=6)
    reference = DynamicCache()
    g = torch.Generator().manual_seed(0)
    for length in (3, 1, 1):
        k, v = torch.randn(4, 2, length, 8, generator=g), torch.randn(4, 2, length, 8, generator=g)
        got, expected = ours.update(k, v), reference.update(k, v, layer_idx=0)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    keep = torch.tensor([2, 0, 0])
    ours.batch_select_indices(keep)
    reference.layers[0].batch_select_indices(keep)
    assert torch.equal(ours.keys, reference.layers[0].keys)
    assert ours.get_seq_length() == 5
    k = torch.randn(3, 2, 1, 8)
    assert torch.equal(ours.update(k, k)[0], reference.update(k, k, layer_idx=0)[0])
    with pytest.raises(ValueError, match="capacity 6"):
        ours.update(k, k)


def test_grouped_decode_attention_equals_repeated_heads():
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    module = _model().model.layers[0].self_attn
    g = torch.Generator().manual_seed(0)
    query = torch.randn(5, 4, 1, 8, generator=g)
    key, value = torch.randn(5, 2, 9, 8, generator=g), torch.randn(5, 2, 9, 8, generator=g)
    mask = torch.ones(5, 1, 1, 9, dtype=torch.bool)
    mask[1, ..., :4] = False
    ours, _ = decode_sdpa(module, query, key, value, mask, scaling=0.3)
    theirs, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.3)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
