"""Qwen2-VL multimodal rotary positions (mrope): three position ids per token (time, height,
width) instead of one.

Text tokens get the same position on all three axes, counting on from the previous token; the
tokens of one image (t × h/m × w/m merged patches, m the spatial merge size) get the image's
start position plus their (t, row, column) index; text after an image continues from the start
position plus the image's larger side (h/m or w/m). The same rule as transformers 5.19's
`Qwen2_5_VLModel.get_rope_index` (the oracle in tests/runtime/vl/test_mrope.py) and verl's
`get_rope_index`, for images; vision tokens are found by id as the model finds its placeholders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class MRopeSpec:
    image_token_id: int
    video_token_id: int
    vision_start_token_id: int
    vision_end_token_id: int
    spatial_merge_size: int

    @classmethod
    def of(cls, config: Any) -> MRopeSpec | None:
        """The model's spec, or None for a text-only model."""
        vision = getattr(config, "vision_config", None)
        if vision is None or getattr(config, "image_token_id", None) is None:
            return None
        return cls(
            image_token_id=config.image_token_id,
            video_token_id=config.video_token_id,
            vision_start_token_id=config.vision_start_token_id,
            vision_end_token_id=config.vision_end_token_id,
            spatial_merge_size=vision.spatial_merge_size,
        )

    @property
    def special_ids(self) -> list[int]:
        """Tokens a rollout must never sample: a placeholder with no image behind it."""
        return [
            self.image_token_id,
            self.video_token_id,
            self.vision_start_token_id,
            self.vision_end_token_id,
        ]


def mrope_positions(
    ids: torch.Tensor, image_grid_thw: torch.Tensor | None, spec: MRopeSpec
) -> torch.Tensor:
    """(3, n) positions for one sequence of valid tokens (no padding)."""
    is_image = (ids == spec.image_token_id).tolist()
    grids = iter(image_grid_thw.tolist() if image_grid_thw is not None else [])
    parts: list[torch.Tensor] = []
    start, position, n = 0, 0, len(is_image)
    while start < n:
        stop = start + 1
        while stop < n and is_image[stop] == is_image[start]:
            stop += 1
        if is_image[start]:
            block, position = _image_block(next(grids), position, spec.spatial_merge_size)
            assert block.shape[1] == stop - start, (
                f"{stop - start} image tokens for a grid of {block.shape[1]}"
            )
            parts.append(block)
        else:
            parts.append(torch.arange(position, position + stop - start).expand(3, -1))
            position += stop - start
        start = stop
    return torch.cat(parts, dim=1) if parts else torch.zeros(3, 0, dtype=torch.long)


def _image_block(grid: Sequence[int], start: int, merge: int) -> tuple[torch.Tensor, int]:
    t, h, w = grid[0], grid[1] // merge, grid[2] // merge
    tt, hh, ww = torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij")
    block = torch.stack([tt, hh, ww]).reshape(3, -1) + start
    return block, start + max(h, w)


def batch_mrope_positions(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    image_grids: Sequence[torch.Tensor | None],
    spec: MRopeSpec,
) -> torch.Tensor:
    """(rows, 3, T) positions of padded rows; padding positions are 0."""
    out = torch.zeros(input_ids.shape[0], 3, input_ids.shape[1], dtype=torch.long)
    for row, (ids, mask, grid) in enumerate(
        zip(input_ids, attention_mask, image_grids, strict=True)
    ):
        valid = mask.bool().cpu()
        out[row][:, valid] = mrope_positions(ids.cpu()[valid], grid, spec)
    return out


def next_text_position(positions: torch.Tensor) -> torch.Tensor:
    """(rows,) the position a token appended after (rows, 3, T) positions takes on every axis."""
    return positions.amax(dim=(1, 2)) + 1
