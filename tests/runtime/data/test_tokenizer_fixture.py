from __future__ import annotations

from pathlib import Path

import pytest

from kuberl_runtime.testing.tokenizer import SPECIAL_TOKENS, build_arith_tokenizer

TOKENIZER_DIR = Path(__file__).resolve().parents[3] / "examples" / "tokenizer" / "arith-tokenizer"


@pytest.mark.parametrize(
    "text",
    [
        "Ava has 12 apples. Ava buys 7 more apples.\n12 + 7 = 19\n#### 19",
        "  leading spaces, tabs\tand ünïcödé → ∑ 😀",
        "",
    ],
)
def test_round_trip(tokenizer, text: str) -> None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text


def test_digits_are_one_token_each(tokenizer) -> None:
    tokens = tokenizer.convert_ids_to_tokens(
        tokenizer("2026", add_special_tokens=False)["input_ids"]
    )
    assert tokens == ["2", "0", "2", "6"]


def test_vocab_is_tiny_with_special_tokens(tokenizer) -> None:
    assert 256 < len(tokenizer) <= 512
    assert tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    for token in SPECIAL_TOKENS:
        assert tokenizer.convert_ids_to_tokens(tokenizer.convert_tokens_to_ids(token)) == token


def test_chat_template_renders_chatml(tokenizer) -> None:
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert (
        text
        == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )
    without = tokenizer.apply_chat_template(messages, tokenize=False)
    assert not without.endswith("assistant\n")


def test_decode_skip_special_tokens_drops_eos(tokenizer) -> None:
    ids = tokenizer("#### 4", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert tokenizer.decode(ids, skip_special_tokens=True) == "#### 4"


def test_committed_tokenizer_matches_a_fresh_build(tokenizer) -> None:
    # If this fails, rerun examples/tokenizer/make_tokenizer.py and commit its output.
    fresh = build_arith_tokenizer()
    assert fresh.get_vocab() == tokenizer.get_vocab()
    assert fresh.chat_template == tokenizer.chat_template
    assert (TOKENIZER_DIR / "tokenizer.json").stat().st_size < 64_000
