"""`Batch`: the rows of one training step — named tensors plus per-row Python objects.

Row layout (verl): `prompts` (rows, P) left-padded, `responses` (rows, L) right-padded,
`input_ids` = prompts ‖ responses, `attention_mask`, `position_ids`, `response_mask` (rows, L);
later stages add `old_log_probs`, `ref_log_prob`, `values`, `token_level_scores`,
`token_level_rewards`, `advantages`, `returns`. Non-tensors: `uid`, `sample` (the PromptSample).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Batch:
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    objects: dict[str, list[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        for value in self.tensors.values():
            return value.shape[0]
        for items in self.objects.values():
            return len(items)
        return 0

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.tensors[key]

    def __setitem__(self, key: str, value: torch.Tensor) -> None:
        assert value.shape[0] == len(self) or not self.tensors, (key, value.shape, len(self))
        self.tensors[key] = value

    def __contains__(self, key: str) -> bool:
        return key in self.tensors

    def select(self, rows: Sequence[int] | torch.Tensor) -> Batch:
        index = torch.as_tensor(rows, dtype=torch.long)
        positions = index.tolist()
        return Batch(
            {k: v.index_select(0, index) for k, v in self.tensors.items()},
            {k: [items[i] for i in positions] for k, items in self.objects.items()},
        )

    def to(self, device: torch.device) -> Batch:
        return Batch({k: v.to(device) for k, v in self.tensors.items()}, dict(self.objects))

    def pick(self, *keys: str) -> Batch:
        """A view holding only `keys` (tensors) and no objects."""
        return Batch({k: self.tensors[k] for k in keys})

    @staticmethod
    def concat(parts: Sequence[Batch]) -> Batch:
        first = parts[0]
        return Batch(
            {k: torch.cat([p.tensors[k] for p in parts]) for k in first.tensors},
            {k: [x for p in parts for x in p.objects[k]] for k in first.objects},
        )

    @property
    def response_length(self) -> int:
        return self.tensors["responses"].shape[1]


def shard_rows(num_rows: int, mini_batch_rows: int, rank: int, world_size: int) -> list[int]:
    """Rows this rank works on: its 1/world share of every global mini-batch, in order.

    Splitting each mini-batch (not the whole batch) across ranks makes every optimizer step see
    the same rows whatever the world size, so 1 and 2 ranks produce the same updates.
    """
    assert num_rows % world_size == 0 and mini_batch_rows % world_size == 0
    share = mini_batch_rows // world_size
    rows: list[int] = []
    for start in range(0, num_rows, mini_batch_rows):
        stop = min(start + mini_batch_rows, num_rows)
        part = (stop - start) // world_size
        part = share if stop - start == mini_batch_rows else part
        rows.extend(range(start + rank * part, start + (rank + 1) * part))
    return rows
