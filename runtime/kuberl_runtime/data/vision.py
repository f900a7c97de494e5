"""Image prompts (verl 0.9.1's multimodal dataset rows): images → processor → vision tokens.

A row's `data.image_key` column holds a list of images as verl's preprocessing writes them:
`{"bytes": b"..."}` or `{"path": "..."}` dicts (what `datasets.Image` stores in parquet), raw
bytes, a file path, or a PIL image. Each `<image>` placeholder in the chat messages becomes an
`{"type": "image"}` content part; the processor's chat template renders it as the model's vision
tokens and the processor call expands them to one token per merged patch, so prompt lengths,
truncation and overlong filtering count vision tokens. Videos are not supported yet.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from kuberl_runtime.data.errors import DataError

_PLACEHOLDER = re.compile(r"(<image>|<video>)")
# Processor outputs the model's forward takes for images (the ids and mask are the prompt's own).
TRAINING_INPUT_KEYS = ("pixel_values", "image_grid_thw")


@dataclass(frozen=True)
class VisionPrompt:
    """A prompt's images (RGB), its rendered text and, when cached, the processor's training
    inputs for them."""

    images: tuple[Image.Image, ...]
    text: str
    inputs: Mapping[str, torch.Tensor] | None = field(default=None, compare=False)
    processor_kwargs: Mapping[str, Any] = field(default_factory=dict, compare=False)
    """`data.mm_processor_kwargs`: vLLM's own processing of the images must match ours."""

    @property
    def multi_modal_data(self) -> dict[str, list[Image.Image]]:
        """What vLLM takes beside the prompt's token ids."""
        return {"image": list(self.images)}


def load_image(value: Any, where: str) -> Image.Image:
    """One image cell as an RGB PIL image (verl's `process_image` inputs)."""
    if isinstance(value, Image.Image):
        return value.convert("RGB")
    if isinstance(value, Mapping):
        if value.get("bytes") is not None:
            return load_image(value["bytes"], where)
        if value.get("path"):
            return load_image(value["path"], where)
        raise DataError(f"image in {where} has neither 'bytes' nor 'path': {sorted(value)}")
    if isinstance(value, (bytes, bytearray)):
        return Image.open(io.BytesIO(value)).convert("RGB")
    if isinstance(value, (str, Path)):
        path = Path(str(value).removeprefix("file://")).expanduser()
        if not path.is_file():
            raise DataError(f"image file {value!r} in {where} not found")
        return Image.open(path).convert("RGB")
    raise DataError(
        f"image in {where} is a {type(value).__name__}; expected {{'bytes': ...}}, "
        "{'path': ...}, bytes, a file path or a PIL image"
    )


def load_images(cell: Any, where: str) -> tuple[Image.Image, ...]:
    if cell is None:
        return ()
    if not isinstance(cell, (list, tuple)):
        cell = [cell]
    return tuple(load_image(value, where) for value in cell)


def vision_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """verl's `_build_messages`: `<image>`/`<video>` in a string content become content parts."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            parts: list[dict[str, str]] = []
            for segment in _PLACEHOLDER.split(content):
                if segment == "<image>":
                    parts.append({"type": "image"})
                elif segment == "<video>":
                    parts.append({"type": "video"})
                elif segment:
                    parts.append({"type": "text", "text": segment})
            content = parts
        out.append({**message, "content": content})
    return out


def count_image_parts(messages: Sequence[Mapping[str, Any]]) -> int:
    return sum(
        1
        for message in messages
        if not isinstance(message["content"], str)
        for part in message["content"]
        if part.get("type") == "image"
    )


def process_prompt(
    processor: Any, text: str, images: Sequence[Image.Image], kwargs: Mapping[str, Any]
) -> tuple[list[int], dict[str, torch.Tensor]]:
    """The prompt's token ids (vision tokens expanded) and its training inputs."""
    out = processor(text=[text], images=list(images) or None, return_tensors="pt", **kwargs)
    ids = out["input_ids"][0].tolist()
    inputs = {key: out[key] for key in TRAINING_INPUT_KEYS if key in out}
    return ids, inputs


def vision_token_ids(processor: Any) -> set[int]:
    """Ids that must never be cut by truncation: the image pad and the vision start/end markers."""
    tokenizer = processor.tokenizer
    names = ("<|vision_start|>", "<|vision_end|>", getattr(processor, "image_token", None))
    ids = {tokenizer.convert_tokens_to_ids(name) for name in names if name}
    return {i for i in ids if i is not None and i != tokenizer.unk_token_id}
