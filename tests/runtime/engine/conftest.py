"""A one-rank gloo process group and a fixed batch for engine tests that run inside pytest."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist

REPO = Path(__file__).resolve().parents[3]
TOKENIZER_DIR = REPO / "examples" / "tokenizer" / "arith-tokenizer"


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    if dist.is_initialized():
        yield
        return
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZER_DIR)


@pytest.fixture(scope="module")
def tiny_model_path(tmp_path_factory, tokenizer) -> Path:
    from kuberl_runtime.testing.tiny import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("models") / "tiny", tokenizer, seed=0)


def fixed_batch(tokenizer, rows: int = 8, prompt_length: int = 12, response_length: int = 10):
    """Random prompts of varied length and responses ending early with EOS on some rows."""
    from kuberl_runtime.rollout.base import build_response_batch

    gen = torch.Generator().manual_seed(0)
    vocab = len(tokenizer)
    prompts = torch.full((rows, prompt_length), tokenizer.pad_token_id)
    mask = torch.zeros(rows, prompt_length, dtype=torch.long)
    for row in range(rows):
        length = 4 + row % (prompt_length - 4)
        prompts[row, -length:] = torch.randint(3, vocab, (length,), generator=gen)
        mask[row, -length:] = 1
    responses = torch.randint(3, vocab, (rows, response_length), generator=gen)
    for row in range(0, rows, 3):
        responses[row, 2 + row % (response_length - 2)] = tokenizer.eos_token_id
    batch = build_response_batch(
        prompts, mask, responses, eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id
    )
    batch["advantages"] = torch.randn(rows, response_length, generator=gen) * batch["response_mask"]
    return batch
