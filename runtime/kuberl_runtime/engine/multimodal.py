"""A batch's image inputs: one processor output per row (or None for a text row), joined in row
order for one forward pass — the order the model meets the rows' image tokens in, padded or
packed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

MULTI_MODAL_INPUTS = "multi_modal_inputs"
"""`Batch.objects` key: per row, the processor's `pixel_values` / `image_grid_thw` (verl's name)."""
MROPE_POSITION_IDS = "mrope_position_ids"
"""`Batch.tensors` key: (rows, 3, T) mrope positions of a vision-language batch."""


def join_multi_modal(
    rows: Sequence[Mapping[str, torch.Tensor] | None] | None, device: torch.device | None = None
) -> dict[str, torch.Tensor]:
    """`pixel_values` and `image_grid_thw` of all rows, concatenated; {} when no row has images."""
    present = [row for row in rows or () if row]
    if not present:
        return {}
    keys = present[0].keys()
    return {key: torch.cat([row[key] for row in present]).to(device) for key in keys}


def image_grids(
    rows: Sequence[Mapping[str, torch.Tensor] | None],
) -> list[torch.Tensor | None]:
    return [row.get("image_grid_thw") if row else None for row in rows]
