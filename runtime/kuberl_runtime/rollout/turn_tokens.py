"""Token ids between the policy's turns, from the chat template.

The policy's own tokens are kept exactly as sampled. What the template adds between turns (the
end of the assistant turn the policy did not write, e.g. the newline after ``<|im_end|>``, then
the tool messages and the next assistant header) is the difference between rendering the
conversation with and without the new messages. The sanity check compares a finished
trajectory with the template's rendering of its messages (verl's three modes).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from kuberl_runtime.data.tokenize import ChatTokenizer, encode_text

logger = logging.getLogger(__name__)

SanityMode = Literal["strict", "ignore_strippable", "disable"]
Message = dict[str, Any]
_PROBE = [{"role": "user", "content": "?"}, {"role": "assistant", "content": "!"}]


def render(
    tokenizer: ChatTokenizer,
    messages: Sequence[Message],
    *,
    tools: Sequence[dict[str, Any]] | None = None,
    generation_prompt: bool = False,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """``template_kwargs``: data.apply_chat_template_kwargs, as the dataset rendered prompts."""
    extra = {**(template_kwargs or {}), **({"tools": list(tools)} if tools else {})}
    return tokenizer.apply_chat_template(
        list(messages), add_generation_prompt=generation_prompt, tokenize=False, **extra
    )


def initial_prompt_ids(
    tokenizer: ChatTokenizer,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]],
    template_kwargs: Mapping[str, Any] | None = None,
) -> list[int]:
    """The first prompt with the tools' schemas (templates that know ``tools`` list them)."""
    text = render(
        tokenizer, messages, tools=tools, generation_prompt=True, template_kwargs=template_kwargs
    )
    return encode_text(tokenizer, text)


def context_ids(
    tokenizer: ChatTokenizer,
    history: Sequence[Message],
    new: Sequence[Message],
    written_tail: str,
    tools: Sequence[dict[str, Any]] | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
) -> list[int]:
    """Tokens after the policy's last turn (``history[-1]``, whose text ended with
    ``written_tail``, e.g. its EOS) up to the next assistant header, with ``new`` in between."""
    kw = {"tools": tools, "template_kwargs": template_kwargs}
    before = render(tokenizer, history, **kw)
    after = render(tokenizer, [*history, *new], generation_prompt=True, **kw)
    if not after.startswith(before):  # a template that re-renders earlier turns: verl's way
        logger.debug("chat template re-renders history; tool context from a probe conversation")
        kw = {"template_kwargs": template_kwargs}
        before = render(tokenizer, _PROBE, **kw)
        after = render(tokenizer, [*_PROBE, *new], generation_prompt=True, **kw)
        return encode_text(tokenizer, after[len(before) :]) if after.startswith(before) else []
    unwritten = _unwritten_end(before, str(history[-1]["content"]), written_tail)
    return encode_text(tokenizer, unwritten + after[len(before) :])


def _unwritten_end(rendered: str, content: str, written_tail: str) -> str:
    """The part of the template's end of the last assistant turn the policy did not write."""
    at = rendered.rfind(content)
    if at < 0:
        return ""
    end = rendered[at + len(content) :]
    return end[len(written_tail) :] if end.startswith(written_tail) else ""


def tokenization_matches(
    tokenizer: ChatTokenizer,
    ids: Sequence[int],
    messages: Sequence[Message],
    mode: SanityMode,
    template_kwargs: Mapping[str, Any] | None = None,
) -> bool:
    """Whether ``ids`` (the prompt and the trajectory) equal the template's rendering of
    ``messages`` up to their length (strict), or equal it ignoring whitespace
    (ignore_strippable); disable: always."""
    if mode == "disable":
        return True
    text = render(tokenizer, messages, template_kwargs=template_kwargs)
    if mode == "strict":
        expected = encode_text(tokenizer, text)
        return list(expected[: len(ids)]) == list(ids)
    written = tokenizer.decode(list(ids), skip_special_tokens=False)
    squeeze = "".join
    return squeeze(text.split()).startswith(squeeze(written.split()))
