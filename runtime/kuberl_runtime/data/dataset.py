"""The RL prompt dataset: verl-schema rows, tokenised once, kept unpadded.

Row schema (verl): `data_source`, `prompt` (chat messages or a string, column chosen by
`prompt_key`), `ability`, `reward_model.{style, ground_truth}`, `extra_info` (its `index` becomes
the sample's index). All files are read and tokenised when the dataset is built, so a bad row fails
the job at start-up rather than hours in. With a processor (a vision-language model), rows whose
`image_key` column holds images are rendered and tokenised by it (`data/vision.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
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
from kuberl_runtime.data.vision import (
    VisionPrompt,
    count_image_parts,
    load_images,
    process_prompt,
    vision_messages,
    vision_token_ids,
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
    image_key: str = "images"
    video_key: str = "videos"
    return_multi_modal_inputs: bool = True
    """Keep each image prompt's processor outputs (pixel values, grids) in memory; False:
    recompute them from the images whenever the prompt is batched (`RLDataset.batch`)."""
    mm_processor_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Extra keyword arguments of every processor call (e.g. min_pixels / max_pixels)."""

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
    vision: VisionPrompt | None = None
    """The prompt's images (a vision-language model's image rows only)."""
    agent_name: str | None = None
    """verl's ``agent_name`` column (a multi-turn rollout's agent loop for the row)."""


class RLDataset:
    """An in-memory list of `PromptSample`s; indices come from a `PromptBatchSampler`."""

    def __init__(
        self,
        samples: Sequence[PromptSample],
        processor: Any = None,
        mm_processor_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.samples = list(samples)
        self.processor = processor
        self.mm_processor_kwargs = dict(mm_processor_kwargs or {})

    @classmethod
    def from_files(
        cls,
        files: str | Path | Sequence[str | Path],
        tokenizer: ChatTokenizer,
        options: DatasetOptions | None = None,
        processor: Any = None,
    ) -> RLDataset:
        rows = read_rows(files)
        if not rows:
            raise DataError(f"no rows in data files {files}")
        return cls.from_rows(rows, tokenizer, options or DatasetOptions(), files, processor)

    @classmethod
    def from_rows(
        cls,
        rows: list[SourceRow],
        tokenizer: ChatTokenizer,
        options: DatasetOptions,
        files: object,
        processor: Any = None,
    ) -> RLDataset:
        """Samples from verl-schema records (read from files or given by a custom class)."""
        _check_columns(rows, options)
        samples: list[PromptSample] = []
        for position, row in enumerate(rows):
            sample = _build_sample(row, position, tokenizer, options, processor)
            if sample is not None:
                samples.append(sample)
        _report_filtered(len(rows), len(samples), files, options)
        return cls(samples, processor, options.mm_processor_kwargs)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> PromptSample:
        return self.samples[index]

    def batch(self, indices: Sequence[int]) -> list[PromptSample]:
        """The samples at `indices`, image prompts with their processor inputs."""
        return [self._with_inputs(self.samples[i]) for i in indices]

    def subset(self, indices: Sequence[int]) -> RLDataset:
        return RLDataset(
            [self.samples[i] for i in indices], self.processor, self.mm_processor_kwargs
        )

    def _with_inputs(self, sample: PromptSample) -> PromptSample:
        vision = sample.vision
        if vision is None or vision.inputs is not None:
            return sample
        _, inputs = process_prompt(
            self.processor, vision.text, vision.images, self.mm_processor_kwargs
        )
        return replace(sample, vision=replace(vision, inputs=inputs))


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
    row: SourceRow,
    position: int,
    tokenizer: ChatTokenizer,
    options: DatasetOptions,
    processor: Any = None,
) -> PromptSample | None:
    record = row.record
    messages = _messages(row, options.prompt_key)
    vision = _vision(row, messages, processor, options)
    if vision is not None:
        built = _tokenize_vision(row, messages, vision, processor, options)
        if built is None:
            return None
        ids, vision = built
    else:
        ids = _tokenize(row, messages, tokenizer, options)
        if ids is None:
            return None
    try:
        truncated = truncate_prompt_ids(ids, options.max_prompt_length, options.truncation)
    except PromptTooLongError as err:
        raise DataError(
            f"prompt in {row.path} row {row.row} is {err.length} tokens, longer than "
            f"data.max_prompt_length={err.max_length} with data.truncation='error'; raise "
            "data.max_prompt_length, set data.truncation to left/right/middle, or set "
            "data.filter_overlong_prompts=True to drop such rows"
        ) from err
    if vision is not None:
        _check_vision_kept(row, ids, truncated, processor, options)
        if not options.return_multi_modal_inputs:
            vision = replace(vision, inputs=None)
    ids = truncated
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
        vision=vision,
        agent_name=None if record.get("agent_name") is None else str(record["agent_name"]),
    )


def _vision(
    row: SourceRow, messages: list[Message], processor: Any, options: DatasetOptions
) -> VisionPrompt | None:
    """The row's images, or None for a text row (no image column, or an empty one)."""
    where = f"{row.path} row {row.row}"
    if row.record.get(options.video_key):
        raise DataError(
            f"{where} has videos in column {options.video_key!r}: video prompts are not "
            "supported yet; drop the column or point data.video_key elsewhere"
        )
    images = load_images(row.record.get(options.image_key), where)
    if not images:
        return None
    if processor is None:
        raise DataError(
            f"{where} has images in column {options.image_key!r} but the model has no image "
            "processor (not a vision-language model); use a VL model such as Qwen2.5-VL, or drop "
            "the images (set data.image_key to a column that does not exist)"
        )
    placeholders = count_image_parts(vision_messages(messages))
    if placeholders != len(images):
        raise DataError(
            f"{where} has {len(images)} image(s) in {options.image_key!r} but {placeholders} "
            "<image> placeholder(s) in its prompt; write one <image> per image"
        )
    return VisionPrompt(images, text="")


def _tokenize_vision(
    row: SourceRow,
    messages: list[Message],
    vision: VisionPrompt,
    processor: Any,
    options: DatasetOptions,
) -> tuple[list[int], VisionPrompt] | None:
    """Vision tokens expanded (one per merged patch): lengths count them, as verl's filter does."""
    text = processor.apply_chat_template(
        vision_messages(messages),
        add_generation_prompt=True,
        tokenize=False,
        **dict(options.apply_chat_template_kwargs),
    )
    ids, inputs = process_prompt(processor, text, vision.images, options.mm_processor_kwargs)
    if options.filter_overlong_prompts and len(ids) > options.max_prompt_length:
        return None
    kwargs = options.mm_processor_kwargs
    return ids, replace(vision, text=text, inputs=inputs, processor_kwargs=kwargs)


def _check_vision_kept(
    row: SourceRow, ids: list[int], truncated: list[int], processor: Any, options: DatasetOptions
) -> None:
    if len(truncated) == len(ids):
        return
    vision_ids = vision_token_ids(processor)
    if sum(t in vision_ids for t in truncated) != sum(t in vision_ids for t in ids):
        raise DataError(
            f"prompt in {row.path} row {row.row} is {len(ids)} tokens with its image tokens; "
            f"data.truncation={options.truncation!r} to data.max_prompt_length="
            f"{options.max_prompt_length} would cut into them. Raise data.max_prompt_length, "
            "lower the processor's max_pixels (data.mm_processor_kwargs), or set "
            "data.filter_overlong_prompts=True"
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
