"""Prompt → token ids: chat template (or raw text), then verl's truncation rules.

Nothing here pads: prompts stay as lists of token ids until an engine packs them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

Truncation = Literal["error", "left", "right", "middle"]
TRUNCATION_MODES: tuple[Truncation, ...] = ("error", "left", "right", "middle")

Message = dict[str, str]


class ChatTokenizer(Protocol):
    """The two Hugging Face tokenizer calls the dataset needs."""

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def __call__(self, text: str, **kwargs: Any) -> Any: ...


class PromptTooLongError(Exception):
    """Raised under truncation='error'; the dataset re-raises it with file/row context."""

    def __init__(self, length: int, max_length: int) -> None:
        super().__init__(f"prompt is {length} tokens, longer than the limit of {max_length}")
        self.length = length
        self.max_length = max_length


def as_messages(prompt: str | Sequence[Mapping[str, Any]]) -> list[Message]:
    """A plain-string prompt is one user turn; a message list keeps only non-null keys."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [{k: v for k, v in message.items() if v is not None} for message in prompt]


def render_prompt(
    tokenizer: ChatTokenizer,
    messages: list[Message],
    *,
    use_chat_template: bool = True,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """The prompt text the policy sees, ending with the assistant turn header when templated."""
    if not use_chat_template:
        # Raw mode: the contents as written, one turn per line, no role markers.
        return "\n".join(m["content"] for m in messages)
    return tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, **(chat_template_kwargs or {})
    )


def encode_text(tokenizer: ChatTokenizer, text: str) -> list[int]:
    # The template already wrote any BOS/role tokens; adding special tokens again would double them.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def truncate_prompt_ids(ids: list[int], max_length: int, truncation: Truncation) -> list[int]:
    """verl's rules: left keeps the last P, right the first P, middle ⌊P/2⌋ head + the rest tail."""
    if len(ids) <= max_length:
        return ids
    if truncation == "left":
        return ids[len(ids) - max_length :]
    if truncation == "right":
        return ids[:max_length]
    if truncation == "middle":
        head = max_length // 2
        tail = max_length - head
        return ids[:head] + ids[len(ids) - tail :]
    if truncation == "error":
        raise PromptTooLongError(len(ids), max_length)
    raise ValueError(f"unknown truncation {truncation!r}; expected one of {TRUNCATION_MODES}")
