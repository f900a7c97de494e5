"""SFT conversations as token ids with a loss mask, rendered the way verl 0.9.1 renders them.

verl's ``MultiTurnSFTDataset``: each message of ``data.messages_key`` is rendered on its own
with the chat template (the template's system prompt stripped from every message but the
first), the pieces are concatenated, and only assistant messages are trained on — minus their
generation prompt (``<|im_start|>assistant\\n``). The whole conversation is then cut to
``data.max_length`` by ``data.truncation``.

A conversation is stored in the RL row layout so the engine's forward pass serves both: the
"prompt" is everything before the first trained token, the "response" the rest, and the
response mask says which response tokens are trained (``batches.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kuberl_runtime.data.errors import DataError
from kuberl_runtime.data.files import read_rows

logger = logging.getLogger(__name__)

_PROBE = [{"role": "user", "content": ""}]


@dataclass(frozen=True)
class SFTExample:
    prompt_ids: list[int]
    response_ids: list[int]
    loss_mask: list[int]
    """One per response token: 1 where the token is trained on."""

    @property
    def num_loss_tokens(self) -> int:
        return sum(self.loss_mask)


@dataclass(frozen=True)
class RenderOptions:
    messages_key: str
    max_length: int
    truncation: str
    apply_chat_template_kwargs: dict[str, Any]


def load_sft_examples(
    files: list[str], tokenizer: Any, options: RenderOptions, max_samples: int = -1
) -> list[SFTExample]:
    """Every conversation of `files`, or the first `max_samples` (verl: no shuffle here)."""
    rows = read_rows(files)
    if 0 < max_samples < len(rows):
        rows = rows[:max_samples]
    renderer = _Renderer(tokenizer, options)
    examples = []
    for row in rows:
        messages = row.record.get(options.messages_key)
        if not isinstance(messages, list) or not messages:
            raise DataError(
                f"{row.path} row {row.row}: column {options.messages_key!r} must hold a "
                "non-empty list of {role, content} messages (data.messages_key)"
            )
        try:
            examples.append(renderer.render(messages))
        except DataError as err:
            raise DataError(f"{row.path} row {row.row}: {err}") from err
    logger.info("%d SFT conversations from %s", len(examples), ", ".join(files))
    return examples


class _Renderer:
    def __init__(self, tokenizer: Any, options: RenderOptions) -> None:
        self.tokenizer = tokenizer
        self.options = options
        one = self._ids(_PROBE)
        two = self._ids(_PROBE * 2)
        self.system_prompt = one[: len(one) - (len(two) - len(one))]
        self.generation_prompt = self._ids(_PROBE, add_generation_prompt=True)[len(one) :]

    def _ids(self, messages: list[dict], add_generation_prompt: bool = False) -> list[int]:
        kwargs = self.options.apply_chat_template_kwargs
        text = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=add_generation_prompt, tokenize=False, **kwargs
        )
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def render(self, messages: list[dict]) -> SFTExample:
        ids: list[int] = []
        mask: list[int] = []
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or "role" not in message or "content" not in message:
                raise DataError(f"message {index} is not a {{role, content}} mapping")
            piece = self._ids([message])
            if index != 0 and message["role"] != "system":
                piece = piece[len(self.system_prompt) :]
            trained = message["role"] == "assistant"
            skip = len(self.generation_prompt) if trained else len(piece)
            ids += piece
            mask += [0] * min(skip, len(piece)) + [1] * max(len(piece) - skip, 0)
        ids, mask = self._truncate(ids, mask)
        return _split(ids, mask)

    def _truncate(self, ids: list[int], mask: list[int]) -> tuple[list[int], list[int]]:
        limit, how = self.options.max_length, self.options.truncation
        if len(ids) <= limit:
            return ids, mask
        if how == "error":
            raise DataError(
                f"conversation has {len(ids)} tokens, over data.max_length={limit}; raise "
                "max_length or set data.truncation to left or right"
            )
        if how == "left":
            return ids[-limit:], mask[-limit:]
        return ids[:limit], mask[:limit]


def _split(ids: list[int], mask: list[int]) -> SFTExample:
    """Prompt = the tokens before the first trained one (at least one: it predicts the next)."""
    if len(ids) < 2:
        raise DataError("conversation renders to fewer than 2 tokens")
    first = next((i for i, m in enumerate(mask) if m), len(ids) - 1)
    first = max(first, 1)
    return SFTExample(ids[:first], ids[first:], mask[first:])
