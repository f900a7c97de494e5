"""Exact full-vocabulary KL and entropy: values, gradients, and the chunked memory bound."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from kuberl_runtime.algorithms import entropy_from_logits, full_kl_from_logits

F64 = torch.float64


def brute_force_kl(logits, ref_logits):
    log_p = torch.log_softmax(logits.double(), -1)
    log_q = torch.log_softmax(ref_logits.double(), -1)
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def brute_force_entropy(logits):
    log_p = torch.log_softmax(logits.double(), -1)
    return -(log_p.exp() * log_p).sum(-1)


@st.composite
def logits_pairs(draw):
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(1, 9)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    scale = draw(st.sampled_from([0.1, 1.0, 10.0]))
    logits = torch.randn(shape, generator=gen, dtype=F64) * scale
    ref_logits = torch.randn(shape, generator=gen, dtype=F64) * scale
    return logits, ref_logits, draw(st.integers(1, 16))


def test_full_kl_by_hand():
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]], dtype=F64)
    ref_logits = torch.tensor([[0.0, math.log(3.0)], [0.0, math.log(3.0)]], dtype=F64)
    # row 0: p = [½, ½], q = [¼, ¾] ⇒ ½·ln 2 + ½·ln(2/3) = ½·ln(4/3); row 1: p = q ⇒ 0
    expected = torch.tensor([0.5 * math.log(4 / 3), 0.0], dtype=F64)
    torch.testing.assert_close(full_kl_from_logits(logits, ref_logits), expected)


@settings(max_examples=50, deadline=None)
@given(pair=logits_pairs())
def test_full_kl_is_nonnegative_zero_on_itself_and_matches_brute_force(pair):
    logits, ref_logits, chunk = pair
    kl = full_kl_from_logits(logits, ref_logits, chunk_size=chunk)
    assert kl.shape == logits.shape[:-1]
    assert (kl >= 0).all()
    torch.testing.assert_close(kl, brute_force_kl(logits, ref_logits))
    assert torch.equal(
        full_kl_from_logits(logits, logits.clone(), chunk_size=chunk), torch.zeros_like(kl)
    )


@settings(max_examples=6, deadline=None)
@given(pair=logits_pairs())
def test_full_kl_gradients_match_finite_differences(pair):
    logits, ref_logits, chunk = pair
    logits.requires_grad_(True)
    ref_logits.requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda a, b: full_kl_from_logits(a, b, chunk_size=chunk), (logits, ref_logits)
    )


def test_full_kl_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="one shape"):
        full_kl_from_logits(torch.zeros(2, 5), torch.zeros(2, 6))


def test_entropy_by_hand():
    # -30: tokens with (numerically) zero probability, finite as real logits are
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, math.log(3.0), -30.0, -30.0]])
    # uniform over 4 ⇒ ln 4; p = [¼, ¾] ⇒ −(¼·ln ¼ + ¾·ln ¾)
    expected = torch.tensor([math.log(4.0), -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))])
    torch.testing.assert_close(entropy_from_logits(logits), expected, atol=1e-6, rtol=1e-5)


@settings(max_examples=50, deadline=None)
@given(pair=logits_pairs())
def test_entropy_matches_brute_force_for_any_chunk_size(pair):
    logits, _, chunk = pair
    torch.testing.assert_close(
        entropy_from_logits(logits, chunk_size=chunk), brute_force_entropy(logits)
    )


@settings(max_examples=8, deadline=None)
@given(pair=logits_pairs())
def test_entropy_gradients_match_finite_differences(pair):
    logits, _, chunk = pair
    logits.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: entropy_from_logits(z, chunk_size=chunk), (logits,))


def test_bf16_logits_are_computed_in_float32():
    logits = torch.randn(4, 7, 11).to(torch.bfloat16)
    entropy = entropy_from_logits(logits, chunk_size=5)
    assert entropy.dtype == torch.float32
    torch.testing.assert_close(
        entropy.double(), brute_force_entropy(logits.float()), atol=1e-5, rtol=1e-5
    )


ROWS, VOCAB, CHUNK = 64, 50, 8


def tracked_forward_and_backward(fn, tracker_cls):
    logits = torch.randn(ROWS, VOCAB, requires_grad=True)
    ref_logits = torch.randn(ROWS, VOCAB)
    with tracker_cls() as tracker:
        fn(logits, ref_logits).sum().backward()
    return tracker


@pytest.mark.parametrize(
    "fn",
    [
        lambda z, y: entropy_from_logits(z, chunk_size=CHUNK),
        lambda z, y: full_kl_from_logits(z, y, chunk_size=CHUNK),
    ],
    ids=["entropy", "full_kl"],
)
def test_no_allocation_beyond_one_chunk_of_the_vocabulary(fn, allocation_tracker):
    tracker = tracked_forward_and_backward(fn, allocation_tracker)
    big = tracker.larger_than(CHUNK * VOCAB)
    # Only the gradient buffer for the logits may be full size: autograd must return it anyway.
    assert [op for op, _ in big] == ["aten.empty_like.default"], big


def test_the_allocation_tracker_sees_a_full_softmax(allocation_tracker):
    # The bound above can fail: an unchunked computation allocates rows × vocab at once.
    tracker = tracked_forward_and_backward(lambda z, y: brute_force_entropy(z), allocation_tracker)
    assert len(tracker.larger_than(CHUNK * VOCAB)) > 3
