"""The RL prompt dataset: verl-schema rows, tokenised once, kept unpadded.

Row schema (verl): `data_source`, `prompt` (chat messages or a string, column chosen by
`prompt_key`), `ability`, `reward_model.{style, ground_truth}`, `extra_info` (its `index` becomes
the sample's index). All files are read and tokenised when the dataset is built, so a bad row fails
the job at start-up rather than hours in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kuberl_runtime.data.errors import DataError
from kuberl_runtime.data.files import SourceRow, read_rows
from kuberl_runtime.data.tokenize import (
    TRUNCATION_MODES,
    ChatTokenizer,
    Message,
    PromptTooLongError,
    Truncation,
    as_messages,
    encode_text,
    render_prompt,
    truncate_prompt_ids,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatasetOptions:
    """The `data.*` settings the dataset reads (verl names and defaults)."""

    prompt_key: str = "prompt"
    reward_fn_key: str = "data_source"
    max_prompt_length: int = 512
    truncation: Truncation = "error"
    filter_overlong_prompts: bool = False
    return_raw_chat: bool = True
    use_chat_template: bool = True
    apply_chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.truncation not in TRUNCATION_MODES:
            raise DataError(
                f"data.truncation={self.truncation!r} is not one of {', '.join(TRUNCATION_MODES)}"
            )
        if self.max_prompt_length <= 0:
            raise DataError(f"data.max_prompt_length must be > 0, got {self.max_prompt_length}")


@dataclass(frozen=True)
class PromptSample:
    """One prompt ready for rollout: token ids plus what the reward function needs."""

    index: int
    prompt_ids: list[int]
    data_source: str
    ground_truth: str | None
    ability: str | None = None
    reward_style: str | None = None
    extra_info: dict[str, Any] = field(default_factory=dict)
    raw_prompt: list[Message] | None = None


class RLDataset:
    """An in-memory list of `PromptSample`s; indices come from a `PromptBatchSampler`."""

    def __init__(self, samples: Sequence[PromptSample]) -> None:
        self.samples = list(samples)

    @classmethod
    def from_files(
        cls,
        files: str | Path | Sequence[str | Path],
        tokenizer: ChatTokenizer,
        options: DatasetOptions | None = None,
    ) -> RLDataset:
        rows = read_rows(files)
        if not rows:
            raise DataError(f"no rows in data files {files}")
        return cls.from_rows(rows, tokenizer, options or DatasetOptions(), files)

    @classmethod
    def from_rows(
        cls,
        rows: list[SourceRow],
        tokenizer: ChatTokenizer,
        options: DatasetOptions,
        files: object,
    ) -> RLDataset:
        """Samples from verl-schema records (read from files or given by a custom class)."""
        _check_columns(rows, options)
        samples: list[PromptSample] = []
        for position, row in enumerate(rows):
            sample = _build_sample(row, position, tokenizer, options)
            if sample is not None:
                samples.append(sample)
        _report_filtered(len(rows), len(samples), files, options)
        return cls(samples)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> PromptSample:
        return self.samples[index]

    def batch(self, indices: Sequence[int]) -> list[PromptSample]:
        return [self.samples[i] for i in indices]


def _check_columns(rows: list[SourceRow], options: DatasetOptions) -> None:
    required = (options.prompt_key, options.reward_fn_key)
    checked: set[str] = set()
    for row in rows:
        if row.path in checked:
            continue
        checked.add(row.path)
        missing = [c for c in required if c not in row.record]
        if missing:
            raise DataError(
                f"column {missing[0]!r} not found in {row.path}; columns are "
                f"{sorted(row.record)} (set data.prompt_key / data.reward_fn_key to pick columns)"
            )


def _build_sample(
    row: SourceRow, position: int, tokenizer: ChatTokenizer, options: DatasetOptions
) -> PromptSample | None:
    record = row.record
    messages = _messages(row, options.prompt_key)
    ids = _tokenize(row, messages, tokenizer, options)
    if ids is None:
        return None
    try:
        ids = truncate_prompt_ids(ids, options.max_prompt_length, options.truncation)
    except PromptTooLongError as err:
        raise DataError(
            f"prompt in {row.path} row {row.row} is {err.length} tokens, longer than "
            f"data.max_prompt_length={err.max_length} with data.truncation='error'; raise "
            "data.max_prompt_length, set data.truncation to left/right/middle, or set "
            "data.filter_overlong_prompts=True to drop such rows"
        ) from err
    data_source = record[options.reward_fn_key]
    if data_source is None:
        raise DataError(f"{options.reward_fn_key!r} is empty in {row.path} row {row.row}")
    reward_model = record.get("reward_model") or {}
    extra_info = dict(record.get("extra_info") or {})
    ground_truth = reward_model.get("ground_truth")
    return PromptSample(
        index=int(extra_info.get("index", position)),
        prompt_ids=ids,
        data_source=str(data_source),
        # CSV/JSON readers may infer "42" as a number; verl scorers compare strings.
        ground_truth=None if ground_truth is None else str(ground_truth),
        ability=record.get("ability"),
        reward_style=reward_model.get("style"),
        extra_info=extra_info,
        raw_prompt=messages if options.return_raw_chat else None,
    )


def _messages(row: SourceRow, prompt_key: str) -> list[Message]:
    prompt = row.record[prompt_key]
    if not isinstance(prompt, (str, list)):
        raise DataError(
            f"{prompt_key!r} in {row.path} row {row.row} must be a string or a list of "
            f"{{role, content}} messages, got {type(prompt).__name__}"
        )
    messages = as_messages(prompt)
    for message in messages:
        if not isinstance(message.get("role"), str) or not isinstance(message.get("content"), str):
            raise DataError(
                f"{prompt_key!r} in {row.path} row {row.row} has a message without string "
                f"'role' and 'content': {message!r}"
            )
    return messages


def _tokenize(
    row: SourceRow, messages: list[Message], tokenizer: ChatTokenizer, options: DatasetOptions
) -> list[int] | None:
    """Token ids, or None when filter_overlong_prompts drops the row."""
    try:
        text = render_prompt(
            tokenizer,
            messages,
            use_chat_template=options.use_chat_template,
            chat_template_kwargs=options.apply_chat_template_kwargs,
        )
    except Exception as err:
        # verl counts a row the template rejects as overlong when filtering; otherwise it is fatal.
        if options.filter_overlong_prompts:
            logger.warning("dropping %s row %d: chat template failed: %s", row.path, row.row, err)
            return None
        raise DataError(f"chat template failed on {row.path} row {row.row}: {err}") from err
    ids = encode_text(tokenizer, text)
    if options.filter_overlong_prompts and len(ids) > options.max_prompt_length:
        return None
    return ids


def _report_filtered(num_rows: int, num_kept: int, files: object, options: DatasetOptions) -> None:
    if num_kept == num_rows:
        return
    logger.info(
        "filter_overlong_prompts dropped %d of %d rows longer than %d tokens",
        num_rows - num_kept,
        num_rows,
        options.max_prompt_length,
    )
    if num_kept == 0:
        raise DataError(
            f"every row of {files} is longer than data.max_prompt_length="
            f"{options.max_prompt_length}; raise it or turn off data.filter_overlong_prompts"
        )
