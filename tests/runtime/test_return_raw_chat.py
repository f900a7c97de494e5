"""`data.return_raw_chat` changes what a reward model with its own tokenizer scores.

On (verl's default), the dataset keeps each prompt's chat messages and the RM sees the chat
re-rendered with its own template, the response as the assistant turn. Off, the RM sees the
actor-rendered prompt decoded as text, followed by the response. The rows go from a data file
through the dataset and `RewardModelScorer.score` as in a run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from kuberl_runtime.data import DatasetOptions, RLDataset
from kuberl_runtime.reward_model import RewardInputs, RewardModelScorer
from kuberl_runtime.rollout.base import build_response_batch
from kuberl_runtime.testing.tiny import save_tiny_model
from kuberl_runtime.trainer.batch import Batch

TOKENIZER_DIR = Path(__file__).resolve().parents[2] / "examples" / "tokenizer" / "arith-tokenizer"
RM_TEMPLATE = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
CHAT = [{"role": "user", "content": "2+3"}]


class _Recording(nn.Module):
    """The RM, noting the ids it is given (what the scorer feeds it)."""

    def __init__(self, rm: nn.Module) -> None:
        super().__init__()
        self.rm = rm
        self.seen: list[list[int]] = []

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs):
        for ids, mask in zip(input_ids, attention_mask, strict=True):
            self.seen.append(ids[mask.bool()].tolist())
        return self.rm(input_ids=input_ids, attention_mask=attention_mask, **kwargs)


def _scored_batch(data_file: Path, actor_tok, return_raw_chat: bool) -> Batch:
    """One prompt from `data_file` as the dataset gives it, answered "5"."""
    options = DatasetOptions(max_prompt_length=64, return_raw_chat=return_raw_chat)
    sample = RLDataset.from_files(str(data_file), actor_tok, options)[0]
    response = actor_tok("5", add_special_tokens=False)["input_ids"] + [actor_tok.eos_token_id]
    prompts = torch.tensor([sample.prompt_ids])
    batch = build_response_batch(
        prompts,
        torch.ones_like(prompts),
        torch.tensor([response]),
        eos_ids=[actor_tok.eos_token_id],
        pad_id=actor_tok.pad_token_id,
    )
    batch.objects = {"sample": [sample]}
    return batch


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> dict[bool, tuple[list[int], float]]:
    """What the RM receives and its score, with data.return_raw_chat on and off."""
    tmp = tmp_path_factory.mktemp("raw-chat")
    data_file = tmp / "train.jsonl"
    row = {"prompt": CHAT, "data_source": "x", "reward_model": {"ground_truth": "5"}}
    data_file.write_text(json.dumps(row) + "\n")
    actor_tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    rm_tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    rm_tok.chat_template = RM_TEMPLATE
    rm = AutoModelForSequenceClassification.from_pretrained(
        save_tiny_model(tmp / "rm", actor_tok, seed=3), num_labels=1
    )
    out = {}
    for flag in (True, False):
        recording = _Recording(rm)
        scorer = RewardModelScorer(recording, inputs=RewardInputs(source=actor_tok, target=rm_tok))
        score = scorer.score(_scored_batch(data_file, actor_tok, flag))
        assert len(recording.seen) == 1
        out[flag] = (recording.seen[0], float(score[0]))
    return out


def test_on_the_rm_scores_the_chat_in_its_own_template(scored) -> None:
    rm_tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    expected = rm_tok("[user] 2+3\n[assistant] 5\n", add_special_tokens=False)["input_ids"]
    assert scored[True][0] == expected


def test_off_the_rm_scores_the_actor_rendered_prompt_as_text(scored) -> None:
    actor_tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    rendered = actor_tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    prompt_ids = actor_tok(rendered, add_special_tokens=False)["input_ids"]
    text = actor_tok.decode(prompt_ids, skip_special_tokens=True) + "5"
    rm_tok = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    assert scored[False][0] == rm_tok(text, add_special_tokens=False)["input_ids"]
    assert "[user]" not in actor_tok.decode(scored[False][0])
    assert scored[False][0] != scored[True][0]
    assert scored[False][1] != pytest.approx(scored[True][1])
