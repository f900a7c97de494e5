"""Why `use_fused_kernels` and `entropy_checkpointing` have no effect in kuberl.

verl's fused kernels compute log-probs and entropy without a full-vocabulary fp32 logits tensor;
`entropy_checkpointing` recomputes the entropy's softmax in backward instead of storing it.
kuberl's one path (engine/logprob.py `token_log_probs`, algorithms/entropy.py) already does both:
what autograd keeps for backward (watched with torch's saved-tensor hooks) is the logits as the
model made them (bf16 here), the labels and one fp32 number per row; nothing vocabulary-wide in
fp32, and the gradients still match the plain fp32 log-softmax.
"""

from __future__ import annotations

import torch

from kuberl_runtime.algorithms import entropy_from_logits
from kuberl_runtime.engine.logprob import LOGPROB_CHUNK_ROWS, token_log_probs

ROWS = 3 * LOGPROB_CHUNK_ROWS + 5  # several chunks
VOCAB = 300


def _saved_while(run) -> list[torch.Tensor]:
    saved: list[torch.Tensor] = []

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        run()
    return saved


def _logits() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(ROWS, VOCAB, generator=gen) * 3).bfloat16().requires_grad_()


def test_log_probs_and_entropy_keep_no_fp32_vocabulary_tensor_for_backward():
    logits = _logits()
    labels = torch.randint(0, VOCAB, (ROWS,), generator=torch.Generator().manual_seed(1))
    out: dict[str, torch.Tensor] = {}

    def run() -> None:
        out["log_probs"] = token_log_probs(logits, labels)
        out["entropy"] = entropy_from_logits(logits, chunk_size=LOGPROB_CHUNK_ROWS)

    saved = _saved_while(run)
    vocabulary_wide = [t for t in saved if t.dim() == 2 and t.shape[-1] == VOCAB]
    storage = logits.untyped_storage().data_ptr()
    # Only views of the bf16 logits themselves; no fp32 copy, softmax or log-softmax.
    assert vocabulary_wide
    assert all(t.untyped_storage().data_ptr() == storage for t in vocabulary_wide)
    assert all(t.dtype == torch.bfloat16 for t in vocabulary_wide)
    others = [t for t in saved if t.untyped_storage().data_ptr() != storage]
    assert all(t.numel() == ROWS for t in others), [tuple(t.shape) for t in others]

    (out["log_probs"].sum() - 0.1 * out["entropy"].sum()).backward()
    reference = logits.detach().float().requires_grad_()
    log_softmax = torch.log_softmax(reference, -1)
    picked = log_softmax.gather(-1, labels[:, None]).squeeze(-1)
    entropy = -(log_softmax.exp() * log_softmax).sum(-1)
    (picked.sum() - 0.1 * entropy.sum()).backward()
    torch.testing.assert_close(out["log_probs"], picked.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out["entropy"], entropy.detach(), atol=1e-4, rtol=1e-5)
    assert logits.grad is not None and logits.grad.dtype == torch.bfloat16
    torch.testing.assert_close(logits.grad.float(), reference.grad, atol=1e-2, rtol=1e-2)
