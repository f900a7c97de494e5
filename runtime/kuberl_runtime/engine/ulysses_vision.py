"""A vision-language batch's inputs under Ulysses SP: whole sequences, split after the image merge.

Slicing the ids before the model runs would cut images apart: the model merges each image's
features in at its image tokens, in order over the whole batch. So every rank of an SP group
passes the whole (padded) sequences, all the rows' images and the whole positions; the VL model
runs its vision encoder and embedding on them, and the language model's forward pre-hook
(`ulysses.split_after_image_merge`) keeps this rank's slice of the merged embeddings and of the
positions. Positions are transformers' packed layout for Qwen2-VL, (4, rows, S): the text
positions (where packed sequences restart; what the Ulysses attention gathers) above the three
mrope axes; a text-only batch's mrope positions are its text positions on every axis.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F

from kuberl_runtime.engine.multimodal import MROPE_POSITION_IDS
from kuberl_runtime.engine.ulysses import WHOLE_SEQUENCE


def whole_sequence_inputs(
    batch: Mapping[str, torch.Tensor],
    ids: torch.Tensor,
    positions: torch.Tensor,
    total: int,
    packed: bool,
    multi_modal: Mapping[str, torch.Tensor],
) -> dict[str, object]:
    """The VL model's keyword inputs for (rows, S) `ids` and text `positions` (packed: one row of
    the valid tokens), padded on the right to `total` tokens: ids 0, positions 0."""
    mrope = _mrope_axes(batch, positions, packed)
    stacked = torch.cat([positions[None], mrope])
    return {
        "input_ids": _pad_last(ids, total),
        "position_ids": _pad_last(stacked, total),
        WHOLE_SEQUENCE: True,
        **multi_modal,
    }


def _mrope_axes(
    batch: Mapping[str, torch.Tensor], positions: torch.Tensor, packed: bool
) -> torch.Tensor:
    """(3, rows, S) mrope positions of the same tokens as `positions`."""
    if MROPE_POSITION_IDS not in batch:
        return positions[None].expand(3, -1, -1)
    axes = batch[MROPE_POSITION_IDS].transpose(0, 1)  # (3, rows, T)
    if packed:
        return axes[:, batch["attention_mask"].bool()][:, None]
    return axes


def _pad_last(x: torch.Tensor, length: int) -> torch.Tensor:
    return F.pad(x, (0, length - x.shape[-1]))
