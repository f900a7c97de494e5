"""`reward_model.model.input_tokenizer`: an RM with its own tokenizer scores re-tokenised text."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from kuberl_runtime.data import PromptSample
from kuberl_runtime.reward_model import RewardInputs, RewardModelScorer
from kuberl_runtime.rollout.base import build_response_batch
from kuberl_runtime.testing.tiny import save_tiny_model

TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "examples" / "tokenizer" / "arith-tokenizer"
RM_TEMPLATE = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"


def _batch(actor_tok):
    chat = [{"role": "user", "content": "2+3"}]
    text = actor_tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    prompt = actor_tok(text, add_special_tokens=False)["input_ids"]
    response = actor_tok("5", add_special_tokens=False)["input_ids"] + [actor_tok.eos_token_id]
    prompts = torch.tensor([prompt])
    batch = build_response_batch(
        prompts,
        torch.ones_like(prompts),
        torch.tensor([response + [actor_tok.pad_token_id] * 2]),
        eos_ids=[actor_tok.eos_token_id],
        pad_id=actor_tok.pad_token_id,
    )
    sample = PromptSample(index=0, prompt_ids=prompt, data_source="x", ground_truth="5")
    batch.objects = {"sample": [PromptSample(**{**sample.__dict__, "raw_prompt": chat})]}
    return batch


def test_rows_are_rendered_with_the_rm_template_and_tokenizer() -> None:
    actor_tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    rm_tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    rm_tok.chat_template = RM_TEMPLATE
    rows = RewardInputs(source=actor_tok, target=rm_tok).rows(_batch(actor_tok))
    expected = rm_tok("[user] 2+3\n[assistant] 5\n", add_special_tokens=False)["input_ids"]
    assert rows["input_ids"][0].tolist() == expected
    assert rows["attention_mask"][0].tolist() == [1] * len(expected)


def test_scorer_feeds_the_rm_the_retokenised_rows(tmp_path) -> None:
    actor_tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    rm_tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    rm_tok.chat_template = RM_TEMPLATE
    rm = AutoModelForSequenceClassification.from_pretrained(
        save_tiny_model(tmp_path / "rm", actor_tok, seed=3), num_labels=1
    )
    batch = _batch(actor_tok)
    inputs = RewardInputs(source=actor_tok, target=rm_tok)
    rows = inputs.rows(batch)
    direct = rm(input_ids=rows["input_ids"], attention_mask=rows["attention_mask"]).logits[:, 0]
    as_is = RewardModelScorer(rm).score(batch)
    switched = RewardModelScorer(rm, inputs=inputs).score(batch)
    torch.testing.assert_close(switched, direct.detach())
    assert not torch.allclose(switched, as_is)
