from __future__ import annotations

import pytest

from kuberl_runtime.data.tokenize import (
    PromptTooLongError,
    as_messages,
    encode_text,
    render_prompt,
    truncate_prompt_ids,
)

IDS = list(range(10))


@pytest.mark.parametrize(
    ("truncation", "max_length", "expected"),
    [
        ("left", 4, [6, 7, 8, 9]),
        ("right", 4, [0, 1, 2, 3]),
        ("middle", 4, [0, 1, 8, 9]),
        # Odd limit: floor(P/2) from the head, the rest from the tail.
        ("middle", 5, [0, 1, 7, 8, 9]),
        ("middle", 1, [9]),
        ("left", 10, IDS),
        ("error", 10, IDS),
    ],
)
def test_truncate_prompt_ids(truncation: str, max_length: int, expected: list[int]) -> None:
    assert truncate_prompt_ids(IDS, max_length, truncation) == expected  # type: ignore[arg-type]


def test_truncate_error_reports_length_and_limit() -> None:
    with pytest.raises(PromptTooLongError) as info:
        truncate_prompt_ids(IDS, 7, "error")
    assert (info.value.length, info.value.max_length) == (10, 7)


def test_truncate_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError, match="unknown truncation"):
        truncate_prompt_ids(IDS, 3, "both")  # type: ignore[arg-type]


def test_as_messages_wraps_plain_string_and_drops_null_keys() -> None:
    assert as_messages("hi") == [{"role": "user", "content": "hi"}]
    parquet_style = [{"role": "user", "content": "hi", "name": None}]
    assert as_messages(parquet_style) == [{"role": "user", "content": "hi"}]


def test_render_prompt_templated_ends_with_generation_prompt(tokenizer) -> None:
    text = render_prompt(tokenizer, [{"role": "user", "content": "2+2?"}])
    assert text == "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n"


def test_render_prompt_raw_has_no_template(tokenizer) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]
    assert render_prompt(tokenizer, messages, use_chat_template=False) == "be brief\n2+2?"


def test_encode_text_adds_no_special_tokens(tokenizer) -> None:
    ids = encode_text(tokenizer, "<|im_start|>user")
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert tokenizer.decode(ids) == "<|im_start|>user"
